//! cicada's `openai-audio` against a real vLLM serving a tiny random-weight
//! Whisper (`scripts/make_tiny_whisper.py`, written by `scripts/vllm-server.sh`
//! beside the tiny chat model; vLLM 0.32's CPU build): synthetic tone clips
//! uploaded to `/v1/audio/transcriptions`, streamed and whole. Not one request
//! fails; streamed, the output tokens are the server's usage and its own
//! `/metrics` count, and every request reached it.
//!
//! Run alone: `flock /tmp/cicada-heavy.lock cargo test -p cicada-tests --test real_vllm_audio`.

use std::time::Duration;

use cicada_tests::servers::VllmServer;
use cicada_tests::*;
use serde_json::Value;

/// Whisper's context is its 448 text positions.
const FLAGS: &[&str] = &["--max-model-len", "448"];

const LIMIT: Duration = Duration::from_secs(900);

fn server() -> &'static VllmServer {
    VllmServer::shared_model("VLLM_TINY_WHISPER", FLAGS)
}

fn scenario(n: u64, stream: bool) -> String {
    let v = server();
    format!(
        r#"
seed = 7
[target]
backend = "openai-audio"
base_url = "{url}"
model = "{model}"
stream = {stream}
[dataset]
kind = "audio"
duration = 1.0
range_ratio = 0.5
sample_rate = 16000
output_len = 12
[load]
num_prompts = {n}
max_concurrency = 4
"#,
        url = v.url,
        model = v.name,
    )
}

fn server_count(j: &Value, key: &str) -> f64 {
    j["cicada"]["server"][key].as_f64().unwrap_or(f64::NAN)
}

/// Tone clips, streamed and whole: every one transcribed, none failed, the
/// server finished exactly the run's requests; streamed, the output tokens
/// are its usage and its own count of generated tokens.
#[test]
fn tone_clips_are_transcribed_streamed_and_whole() {
    let _g = serial();
    let dir = scratch();
    const N: u64 = 12;
    let mut seen = Vec::new();
    for stream in [true, false] {
        let name = format!("audio-{stream}");
        let (r, j) = run_scenario(dir.path(), &name, &scenario(N, stream), "2", &[], LIMIT);
        assert_ok(&r);
        let outcomes = &j["cicada"]["outcomes"];
        assert_eq!(j["completed"], N, "{name}: {outcomes}\n{}", r.stdout);
        assert_eq!(j["failed"], 0, "{name}: {outcomes}");
        let bytes = j["cicada"]["counters"]["audio_bytes"].as_u64().unwrap_or(0);
        // 0.5 s .. 1.5 s of 16-bit samples at 16 kHz, 44-byte headers
        assert!(
            (N * (44 + 16_000)..=N * (44 + 48_000)).contains(&bytes),
            "{name}: {bytes} audio bytes"
        );
        assert_eq!(
            server_count(&j, "requests_finished"),
            N as f64,
            "{name}: {}",
            j["cicada"]["server"]
        );
        if stream {
            let out = j["total_output_tokens"].as_u64().unwrap_or(0);
            assert_eq!(j["cicada"]["token_sources"]["usage"], N, "{name}");
            assert!((N..=N * 12).contains(&out), "{name}: {out} output tokens");
            assert_eq!(
                server_count(&j, "generation_tokens"),
                out as f64,
                "{name}: the server's own count: {}",
                j["cicada"]["server"]
            );
        }
        seen.push(format!(
            "{name}: {} output tokens, mean TTFT {:.1} ms, mean E2EL {:.1} ms",
            j["total_output_tokens"],
            j["mean_ttft_ms"].as_f64().unwrap_or(f64::NAN),
            j["mean_e2el_ms"].as_f64().unwrap_or(f64::NAN),
        ));
    }
    eprintln!("{}", seen.join("\n"));
}
