//! Issue: Slurm. deploy/slurm/cicada.sbatch runs as it is, on one machine
//! standing in for a one-node allocation: `srun` and `scontrol` are small
//! stand-ins (one process per task with SLURM_PROCID set), the "model server"
//! is `cicada mock`, everything on loopback. The script starts the server,
//! waits for it, starts the coordinator and the workers, and the run
//! completes; nothing it started is left running.

use std::fs::File;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use cicada_tests::*;

/// Slurm's `srun` for one machine: the command once per task, with the
/// task's SLURM_PROCID; stopping it stops the tasks. Unknown options fail, so
/// a script change the stand-in does not understand is noticed.
const SRUN: &str = r#"#!/usr/bin/env bash
ntasks=${SLURM_NTASKS:-1}
while [[ $# -gt 0 ]]; do
    case "$1" in
        --ntasks=*) ntasks=${1#*=}; shift ;;
        --output=*) output=${1#*=}; shift ;;
        --nodes=*|--ntasks-per-node=*|--export=*) shift ;;
        --overlap) shift ;;
        -*) echo "fake srun: unknown option $1" >&2; exit 2 ;;
        *) break ;;
    esac
done
pids=()
for ((i = 0; i < ntasks; i++)); do
    if [[ -n "${output:-}" ]]; then
        SLURM_PROCID=$i SLURM_LOCALID=$i SLURM_NODEID=0 "$@" > "${output//%t/$i}" 2>&1 &
    else
        SLURM_PROCID=$i SLURM_LOCALID=$i SLURM_NODEID=0 "$@" &
    fi
    pids+=($!)
done
trap 'kill "${pids[@]}" 2>/dev/null; wait; exit 143' TERM INT
code=0
for p in "${pids[@]}"; do wait "$p" || code=$?; done
exit "$code"
"#;

/// `scontrol show hostnames LIST` for a comma-separated list.
const SCONTROL: &str = r#"#!/usr/bin/env bash
[[ "$1 $2" == "show hostnames" ]] || { echo "fake scontrol: $*" >&2; exit 2; }
tr ',' '\n' <<< "$3"
"#;

fn executable(dir: &Path, name: &str, text: &str) {
    let p = write(dir, name, text);
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
}

#[test]
fn the_sbatch_script_serves_a_model_and_runs_the_fleet_next_to_it() {
    let _g = serial();
    let dir = scratch();
    let fake = dir.path().join("slurm-bin");
    std::fs::create_dir(&fake).unwrap();
    executable(&fake, "srun", SRUN);
    executable(&fake, "scontrol", SCONTROL);
    // no target URL: the script points the scenario at the servers it starts
    let scenario = write(
        dir.path(),
        "s.toml",
        r#"
name = "slurm"
seed = 3
[target]
backend = "openai-chat"
[dataset]
input_len = 16
output_len = 12
[load]
num_prompts = 60
request_rate = 30
"#,
    );
    let (model_port, cicada_port) = (free_port(), free_port());
    let results = dir.path().join("results");
    let log = dir.path().join("cicada.log");
    let out = File::create(&log).unwrap();
    let path = format!(
        "{}:{}:{}",
        fake.display(),
        bin_dir().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let child = Command::new("bash")
        .arg(repo_root().join("deploy/slurm/cicada.sbatch"))
        .arg(&scenario)
        .current_dir(dir.path())
        .env_remove("CICADA_TOKEN")
        .env("PATH", path)
        .env("SLURM_JOB_ID", "4242")
        .env("SLURM_JOB_NODELIST", "127.0.0.1")
        .env("SLURM_JOB_NUM_NODES", "1")
        .env("SLURM_NTASKS", "2")
        .env("MODEL_PORT", model_port.to_string())
        .env("CICADA_PORT", cicada_port.to_string())
        .env(
            "SERVE_CMD",
            format!("exec cicada mock --listen 127.0.0.1:{model_port} --ttft-ms 5 --itl-ms 2"),
        )
        .env("READY_TIMEOUT", "60")
        .env("RESULTS", &results)
        .stdin(Stdio::null())
        .stdout(out.try_clone().unwrap())
        .stderr(out)
        .spawn()
        .unwrap();
    let run = wait_with_limit(child, Duration::from_secs(120));
    let text = std::fs::read_to_string(&log).unwrap();
    assert_eq!(run.code, Some(0), "{text}");

    assert!(text.contains("1 server(s) ready"), "{text}");
    let last = text.lines().rev().find(|l| !l.trim().is_empty()).unwrap();
    assert!(
        last.starts_with("=====") && last.trim_matches('=').is_empty(),
        "the log ends with the result block:\n{text}"
    );
    let j = read_json(&results.join("result.json"));
    assert_eq!(j["completed"].as_u64(), Some(60), "{text}");
    assert_eq!(j["failed"].as_u64(), Some(0));
    let urls = &j["cicada"]["scenario"]["target"]["urls"];
    assert_eq!(
        urls[0].as_str(),
        Some(format!("http://127.0.0.1:{model_port}").as_str()),
        "{}",
        j["cicada"]["scenario"]["target"]
    );
    let shares = j["cicada"]["worker_shares"].as_array().unwrap();
    assert_eq!(shares.len(), 2);
    for s in shares {
        assert_eq!(s["lost"], false);
        assert_eq!(s["reported_requests"], s["planned_requests"]);
    }
    // the server logged to its own file, and was stopped with the job
    let server_log = std::fs::read_to_string(dir.path().join("cicada-4242-server-0.log")).unwrap();
    assert!(server_log.contains("cicada mock serving"), "{server_log}");
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        std::net::TcpStream::connect(("127.0.0.1", model_port)).is_err(),
        "the model server outlived the job"
    );
}
