//! llama-server's grammar-backed structured output through cicada: a JSON
//! schema it enforces holds, and one only cicada checks is caught.
//!
//! Run alone: `cargo test --workspace --test real_llamacpp_structured`.

use std::time::Duration;

use cicada_tests::servers::LlamaServer;
use cicada_tests::*;

/// A JSON schema llama-server enforces (grammar-backed `response_format`):
/// every answer parses and follows it, so nothing fails and nothing is
/// `invalid_output`. The grammar lets whitespace run up to 20 characters at
/// each of its spaces, so `max_tokens` leaves room for the longest answer it
/// allows. At 160 tokens one answer in 48 was refused by llama-server's own
/// parser ("does not match the expected peg-native format"), most likely an
/// answer the limit cut short. The same schema sent only to cicada's check
/// (`check_only`: the server is not told) is broken by the free-running
/// tiny model, and every such answer is caught as `invalid_output`. The
/// city is ASCII letters (`pattern`): with `maxLength` alone one answer in
/// 24 (full suite, 2026-11-28) held a 10-character city, most likely a
/// byte-level token the grammar counted as one character reaching the
/// answer as replacement characters; cicada was right to call it invalid,
/// but it is the server's tokenizer, not its grammar, that this test is
/// about.
#[test]
fn a_json_schema_it_enforces_holds_and_one_it_was_not_told_is_caught() {
    let _g = serial();
    let server = LlamaServer::start(4, 512);
    let dir = scratch();
    const N: u64 = 24;
    for check_only in [false, true] {
        let name = format!("schema-{check_only}");
        let out = dir.path().join(format!("out-{name}"));
        let scenario = write(
            dir.path(),
            &format!("{name}.toml"),
            &format!(
                r#"
[target]
backend = "llamacpp-chat"
base_url = "{url}"
[dataset]
kind = "random"
input_len = 12
output_len = 360
[load]
num_prompts = {N}
max_concurrency = 4
[sampling]
ignore_eos = false
[structured]
check_only = {check_only}
response_format = {{ type = "json_schema", json_schema = {{ name = "city", schema = {{ type = "object", required = ["city", "n"], additionalProperties = false, properties = {{ city = {{ type = "string", maxLength = 8, pattern = "^[a-z]{{1,8}}$" }}, n = {{ type = "integer", minimum = 0, maximum = 999 }} }} }} }} }}
[output]
dir = "{out}"
max_failure_ratio = 1.0
"#,
                url = server.url,
                out = out.display(),
            ),
        );
        let r = coord_run(
            &["run", scenario.to_str().unwrap(), "--quiet"],
            Duration::from_secs(600),
        );
        assert_ok(&r);
        let j = read_json(&out.join("result.json"));
        let outcomes = &j["cicada"]["outcomes"];
        if check_only {
            // the server generated freely: not one answer is the asked JSON
            assert_eq!(outcomes["invalid_output"]["count"], N, "{outcomes}");
            assert_eq!(j["failed"], N, "{outcomes}");
        } else {
            assert_eq!(j["completed"], N, "{outcomes}\n{}", server.log());
            assert_eq!(j["failed"], 0, "{outcomes}");
        }
    }
}
