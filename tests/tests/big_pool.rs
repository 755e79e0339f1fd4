//! Issue 39 item 3: the pool travels to the workers in pieces after the
//! plan (`PoolChunk`), deflated once for every worker that gets the same
//! entries. Through real coordinator and worker processes against `cicada
//! mock`, with the pieces cut small (`CICADA_POOL_CHUNK_BYTES`, a test knob)
//! so a small pool is many of them: every request carries its own pool
//! entry's prompt at 1 and 2 workers, a shared pool is deflated once, and a
//! piece damaged on its way stops the run naming the worker.

use std::collections::BTreeSet;
use std::time::Duration;

use cicada_scenarios::dataset::build_pool;
use cicada_tests::*;
use serde_json::Value;

const LIMIT: Duration = Duration::from_secs(120);

/// Pieces of 16 KiB: the ~1 MB pool below deflates to a few hundred KB.
const PIECE: &str = "16384";

fn scenario(url: &str, tables: &str) -> String {
    format!(
        "seed = 5\n[target]\nbackend = \"openai\"\nbase_url = \"{url}\"\nmodel = \"cicada-mock\"\n\
         [dataset]\nkind = \"random\"\ninput_len = 1500\nrange_ratio = 0.5\noutput_len = 2\n\
         [load]\nnum_prompts = 120\nrequest_rate = 400\n{tables}"
    )
}

/// A mix of two workloads: every worker that sends gets the whole pool.
const MIX: &str = "[[workloads]]\nname = \"a\"\n[[workloads]]\nname = \"b\"\n[workloads.dataset]\ninput_len = 900\n";

/// The request's global index, from its `x-request-id` (`cicada-<run>-<index>`).
fn index_of(r: &Value) -> usize {
    let id = r["request_id"].as_str().expect("request id");
    id.rsplit('-').next().unwrap().parse().unwrap()
}

/// The pool's prompt fingerprints as the scenario draws it, apart from the run.
fn drawn(text: &str) -> Vec<u64> {
    let s = cicada_scenarios::parse(text, "s.toml", &[]).unwrap();
    build_pool(&s, None)
        .unwrap()
        .entries
        .iter()
        .map(|e| cicada_mock::fingerprint(&e.prompt.text()))
        .collect()
}

/// The coordinator's "pool deflated" debug lines: each one's piece count.
fn deflates(stderr: &str) -> Vec<u64> {
    stderr
        .lines()
        .filter(|l| l.contains("pool deflated"))
        .map(|l| {
            let n = l.split("pieces=").nth(1).expect("a piece count");
            n.split(|c: char| !c.is_ascii_digit())
                .next()
                .unwrap()
                .parse()
                .unwrap()
        })
        .collect()
}

/// Run `text` with `workers` local workers and the test knobs in `env`.
fn run(text: &str, workers: &str, env: &[(&str, &str)]) -> Run {
    let dir = scratch();
    let mut env = env.to_vec();
    env.push(("CICADA_LOG", "warn,cicada_coordinator::fleet=debug"));
    run_scenario_env(dir.path(), "s", text, workers, &[], &env, LIMIT).0
}

/// Striped shares (each worker its own entries), each in many pieces:
/// every request is its own entry's prompt, byte for byte.
#[test]
fn a_pool_in_many_pieces_reaches_one_and_two_workers_whole() {
    let _g = serial();
    for workers in ["1", "2"] {
        let mock = Mock::start(&["--ttft-ms", "1", "--itl-ms", "1"]);
        let text = scenario(&mock.url, "");
        let r = run(&text, workers, &[("CICADA_POOL_CHUNK_BYTES", PIECE)]);
        assert_ok(&r);
        let pieces = deflates(&r.stderr);
        assert_eq!(
            pieces.len(),
            workers.parse::<usize>().unwrap(),
            "{}",
            r.stderr
        );
        assert!(
            pieces.iter().all(|n| *n > 5),
            "many pieces each: {pieces:?}"
        );
        let fps = drawn(&text);
        let log = mock.requests();
        assert_eq!(log.len(), 120, "workers={workers}: {}", r.stderr);
        for req in &log {
            let i = index_of(req);
            assert_eq!(
                req["prompt_fingerprint"],
                fps[i % fps.len()],
                "workers={workers}: request {i} is not its entry's prompt"
            );
        }
    }
}

/// Two workers that get the same pool (a mix) share one deflate of it,
/// and their requests carry the pool's prompts.
#[test]
fn workers_that_get_the_same_pool_share_one_deflate() {
    let _g = serial();
    let mock = Mock::start(&["--ttft-ms", "1", "--itl-ms", "1"]);
    let text = scenario(&mock.url, MIX);
    let r = run(&text, "2", &[("CICADA_POOL_CHUNK_BYTES", PIECE)]);
    assert_ok(&r);
    let pieces = deflates(&r.stderr);
    assert_eq!(pieces.len(), 1, "one deflate for both: {}", r.stderr);
    assert!(pieces[0] > 5, "{pieces:?}");
    let fps: BTreeSet<u64> = drawn(&text).into_iter().collect();
    let log = mock.requests();
    assert_eq!(log.len(), 120, "{}", r.stderr);
    for req in &log {
        let fp = req["prompt_fingerprint"].as_u64().unwrap();
        assert!(
            fps.contains(&fp),
            "request {} is no prompt of the pool",
            index_of(req)
        );
    }
}

/// A piece damaged on its way to worker 1 (after its CRC-32 was taken):
/// that worker refuses it and the coordinator stops, naming the worker and
/// the piece; no request is sent.
#[test]
fn a_damaged_piece_stops_the_run_naming_the_worker() {
    let _g = serial();
    let mock = Mock::start(&["--ttft-ms", "1", "--itl-ms", "1"]);
    let text = scenario(&mock.url, "");
    let r = run(
        &text,
        "2",
        &[
            ("CICADA_POOL_CHUNK_BYTES", PIECE),
            ("CICADA_TEST_DAMAGE_POOL", "1:3"),
        ],
    );
    assert_ne!(r.code, Some(0), "{}", r.stderr);
    assert!(
        r.stderr.contains("worker 1 cannot run the stage")
            && r.stderr.contains("piece 3 of the plan's pool")
            && r.stderr.contains("CRC-32"),
        "{}",
        r.stderr
    );
    assert!(mock.requests().is_empty());
}
