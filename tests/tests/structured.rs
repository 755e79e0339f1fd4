//! Issue 25, tools: tool calls and structured output under load through the
//! real `cicada run` and worker processes, against the mock's ground truth
//! (which answers with tool calls and JSON, and breaks a share on a knob).

use std::path::Path;
use std::time::Duration;

use cicada_tests::*;
use serde_json::Value;

const LIMIT: Duration = Duration::from_secs(120);

const TOOLS: &str = "tools = [{ type = \"function\", function = { name = \"get_weather\", parameters = { type = \"object\", required = [\"city\", \"days\"], additionalProperties = false, properties = { city = { type = \"string\", minLength = 2 }, days = { type = \"integer\", minimum = 1 } } } } }]\n";

fn target(url: &str) -> String {
    format!(
        "seed = 3\n[target]\nbackend = \"openai-chat\"\nbase_url = \"{url}\"\nmodel = \"cicada-mock\"\n[dataset]\ninput_len = 8\noutput_len = 12\n"
    )
}

fn outcome(j: &Value, class: &str) -> u64 {
    j["cicada"]["outcomes"][class]["count"]
        .as_u64()
        .unwrap_or(0)
}

/// The run's summary.csv row, as (header, values).
fn csv_value(dir: &Path, name: &str, column: &str) -> String {
    let (header, rows) = read_csv(&dir.join(format!("out-{name}")).join("summary.csv"));
    let at = header.iter().position(|h| h == column).unwrap();
    rows[0][at].clone()
}

/// Tool calls with a share broken by the mock: cicada counts exactly the
/// broken ones as `invalid_output` (the mock's count of what it broke), in
/// result.json and summary.csv, and every valid call passes. The calls'
/// argument pieces are the only output and count as generated tokens.
#[test]
fn broken_tool_calls_are_counted_as_invalid_output_and_valid_ones_pass() {
    let _g = serial();
    let dir = scratch();
    let mock = Mock::start(&[
        "--ttft-ms",
        "1",
        "--itl-ms",
        "0",
        "--invalid-output",
        "0.3",
        "--usage",
        "false",
    ]);
    let text = format!(
        "{}[load]\nnum_prompts = 60\n[structured]\ntool_choice = \"required\"\n{TOOLS}",
        target(&mock.url)
    );
    let (r, j) = run_scenario(dir.path(), "tools", &text, "2", &[], LIMIT);
    // more than half failed would exit 4; 30 % does not
    assert_ok(&r);
    let broken = mock.stats()["invalid_outputs"].as_u64().unwrap();
    assert!(broken > 5 && broken < 40, "the knob broke {broken} of 60");
    assert_eq!(outcome(&j, "invalid_output"), broken, "{j:#}");
    assert_eq!(j["failed"].as_u64(), Some(broken));
    assert_eq!(j["completed"].as_u64(), Some(60 - broken));
    let first = j["cicada"]["outcomes"]["invalid_output"]["first_error"]
        .as_str()
        .unwrap_or_default();
    assert!(
        first.starts_with("tool call 0 (\"get_weather\"): its arguments break the parameters"),
        "{first}"
    );
    assert_eq!(
        csv_value(dir.path(), "tools", "failed_invalid_output"),
        broken.to_string()
    );
    // no usage: every output token is a content event carrying argument text
    assert_eq!(j["cicada"]["token_source"], "events", "{j:#}");
    assert_eq!(
        j["total_output_tokens"].as_u64(),
        Some(12 * (60 - broken)),
        "{j:#}"
    );
}

/// JSON answers to a schema'd response format, streamed and whole, and
/// JSONL lines with their own shapes: all valid, none counted invalid.
#[test]
fn json_answers_to_their_schema_pass_streamed_and_whole() {
    let _g = serial();
    let dir = scratch();
    let mock = Mock::start(&["--ttft-ms", "1", "--itl-ms", "0"]);
    let format = "response_format = { type = \"json_schema\", json_schema = { name = \"city\", strict = true, schema = { type = \"object\", required = [\"name\", \"tags\"], properties = { name = { type = \"string\" }, tags = { type = \"array\", minItems = 2, items = { enum = [\"a\", \"b\"] } } } } } }\n";
    for stream in [true, false] {
        let name = format!("json-{stream}");
        let text = format!(
            "{}[load]\nnum_prompts = 20\n[structured]\n{format}",
            target(&mock.url).replace("[dataset]", &format!("stream = {stream}\n[dataset]")),
        );
        let (r, j) = run_scenario(dir.path(), &name, &text, "2", &[], LIMIT);
        assert_ok(&r);
        assert_eq!(j["failed"].as_u64(), Some(0), "stream {stream}: {j:#}");
        assert_eq!(j["completed"].as_u64(), Some(20));
    }
    // JSONL lines with their own tool and format, beside plain ones
    let lines = "{\"prompt\": \"a b\", \"output_tokens\": 6, \"response_format\": {\"type\": \"json_object\"}}\n\
                 {\"prompt\": \"c d\", \"output_tokens\": 6}\n\
                 {\"prompt\": \"e f\", \"output_tokens\": 6, \"tool_choice\": \"required\", \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": {\"type\": \"object\", \"properties\": {\"x\": {\"type\": \"number\"}}}}}]}\n";
    let path = write(dir.path(), "lines.jsonl", lines);
    let text = format!(
        "seed = 3\n[target]\nbackend = \"openai-chat\"\nbase_url = \"{}\"\nmodel = \"cicada-mock\"\n[dataset]\nkind = \"jsonl\"\npath = \"{}\"\n[load]\nnum_prompts = 3\n",
        mock.url,
        path.display()
    );
    let (r, j) = run_scenario(dir.path(), "lines", &text, "1", &[], LIMIT);
    assert_ok(&r);
    assert_eq!(j["failed"].as_u64(), Some(0), "{j:#}");
    assert_eq!(j["total_output_tokens"].as_u64(), Some(18));
}

/// A schema the server is not told (`check_only`) is not followed by it,
/// and cicada's check catches every answer: the console names the class.
#[test]
fn a_schema_the_server_was_not_told_is_caught() {
    let _g = serial();
    let dir = scratch();
    let mock = Mock::start(&["--ttft-ms", "1", "--itl-ms", "0"]);
    let text = format!(
        "{}[load]\nnum_prompts = 10\n[structured]\ncheck_only = true\nresponse_format = {{ type = \"json_object\" }}\n[output]\nmax_failure_ratio = 1.0\n",
        target(&mock.url)
    );
    let sc = write(dir.path(), "unsent.toml", &text);
    let out = dir.path().join("out-unsent");
    let r = coord_run(
        &[
            "run",
            sc.to_str().unwrap(),
            "--workers",
            "1",
            "--output-dir",
            out.to_str().unwrap(),
        ],
        LIMIT,
    );
    assert_ok(&r);
    let j = read_json(&out.join("result.json"));
    assert_eq!(outcome(&j, "invalid_output"), 10, "{j:#}");
    let first = j["cicada"]["outcomes"]["invalid_output"]["first_error"]
        .as_str()
        .unwrap_or_default();
    assert!(first.starts_with("the answer is not JSON"), "{first}");
    assert!(r.stdout.contains("invalid_output"), "{}", r.stdout);
    // the mock answered words: it never saw a response format
    assert_eq!(mock.stats()["invalid_outputs"].as_u64(), Some(0));
}

/// Tools in Responses' and Messages' spelling, streamed and whole: the mock
/// reads them, calls the tool in each API's events, breaks a share on the
/// knob, and cicada counts exactly the broken ones as `invalid_output`; the
/// argument pieces are the output (no usage: counted from events). A JSON
/// schema in Responses' `text.format` is answered and checked the same way.
#[test]
fn tool_calls_and_schemas_in_responses_and_messages_are_checked() {
    let _g = serial();
    let dir = scratch();
    for (api, stream) in [
        ("openai-responses", true),
        ("openai-responses", false),
        ("anthropic-messages", true),
        ("anthropic-messages", false),
    ] {
        let mock = Mock::start(&[
            "--ttft-ms",
            "1",
            "--itl-ms",
            "0",
            "--invalid-output",
            "0.3",
            "--usage",
            "false",
            "--api",
            api,
        ]);
        let name = format!("{api}-{stream}");
        let text = format!(
            "{}[load]\nnum_prompts = 40\n[structured]\ntool_choice = {{ type = \"function\", function = {{ name = \"get_weather\" }} }}\n{TOOLS}",
            target(&mock.url).replace(
                "backend = \"openai-chat\"",
                &format!("backend = \"{api}\"\nstream = {stream}")
            )
        );
        let (r, j) = run_scenario(dir.path(), &name, &text, "2", &[], LIMIT);
        assert_ok(&r);
        let broken = mock.stats()["invalid_outputs"].as_u64().unwrap();
        assert!(
            broken > 2 && broken < 30,
            "{name}: the knob broke {broken} of 40"
        );
        assert_eq!(outcome(&j, "invalid_output"), broken, "{name}: {j:#}");
        assert_eq!(j["completed"].as_u64(), Some(40 - broken), "{name}");
        let first = j["cicada"]["outcomes"]["invalid_output"]["first_error"]
            .as_str()
            .unwrap_or_default();
        assert!(
            first.contains("(\"get_weather\"): its arguments break the parameters"),
            "{name}: {first}"
        );
        if stream {
            assert_eq!(j["cicada"]["token_source"], "events", "{name}: {j:#}");
            assert_eq!(
                j["total_output_tokens"].as_u64(),
                Some(12 * (40 - broken)),
                "{name}"
            );
        }
    }
    // a JSON schema: Responses' text.format, Messages' output_config.format
    let format = "response_format = { type = \"json_schema\", json_schema = { name = \"city\", schema = { type = \"object\", required = [\"name\"], properties = { name = { type = \"string\" } } } } }\n";
    for api in ["openai-responses", "anthropic-messages"] {
        let mock = Mock::start(&[
            "--ttft-ms",
            "1",
            "--itl-ms",
            "0",
            "--invalid-output",
            "0.3",
            "--api",
            api,
        ]);
        let name = format!("{api}-json");
        let text = format!(
            "{}[load]\nnum_prompts = 40\n[structured]\n{format}",
            target(&mock.url).replace("backend = \"openai-chat\"", &format!("backend = \"{api}\""))
        );
        let (r, j) = run_scenario(dir.path(), &name, &text, "1", &[], LIMIT);
        assert_ok(&r);
        let broken = mock.stats()["invalid_outputs"].as_u64().unwrap();
        assert!(
            broken > 2 && broken < 30,
            "{name}: the knob broke {broken} of 40"
        );
        assert_eq!(outcome(&j, "invalid_output"), broken, "{name}: {j:#}");
        assert_eq!(j["completed"].as_u64(), Some(40 - broken), "{name}: {j:#}");
    }
}
