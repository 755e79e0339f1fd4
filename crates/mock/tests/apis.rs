//! The mock's native routes (TGI, llama.cpp, Triton), `/metrics`, probes and TLS,
//! exercised over real HTTP.

use std::time::Duration;

use cicada_mock::{MockApi, MockConfig, MockServer, PROBE_HEADER, TlsFiles};
use serde_json::{Value, json};

async fn start(config: MockConfig) -> MockServer {
    let _ = rustls::crypto::ring::default_provider().install_default();
    MockServer::start(config, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap()
}

fn fast() -> MockConfig {
    MockConfig {
        ttft_ms: 2.0,
        itl_ms: 1.0,
        ..MockConfig::default()
    }
}

async fn post(url: &str, body: Value) -> (u16, String) {
    let resp = reqwest::Client::new()
        .post(url)
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    (status, resp.text().await.unwrap_or_default())
}

/// `data:` payloads, with or without the space.
fn payloads(text: &str) -> Vec<Value> {
    text.split("\n\n")
        .filter(|e| !e.is_empty())
        .map(|e| {
            let d = e.strip_prefix("data:").unwrap_or_else(|| panic!("{e}"));
            serde_json::from_str(d.trim_start()).unwrap_or_else(|err| panic!("{d}: {err}"))
        })
        .collect()
}

#[tokio::test]
async fn tgi_streams_token_events_and_answers_generate() {
    let mock = start(fast()).await;
    let (status, text) = post(
        &format!("{}/generate_stream", mock.url()),
        json!({"inputs": "a b c d", "parameters": {"max_new_tokens": 5, "details": true}}),
    )
    .await;
    assert_eq!(status, 200);
    assert!(text.starts_with("data:{"), "TGI writes no space: {text}");
    let ev = payloads(&text);
    assert_eq!(ev.len(), 5);
    assert_eq!(ev[4]["index"], 5);
    assert_eq!(ev[4]["details"]["generated_tokens"], 5);
    assert_eq!(ev[4]["details"]["input_length"], 4);
    assert!(ev[3]["generated_text"].is_null());
    assert!(!text.contains("[DONE]"));
    let (_, text) = post(
        &format!("{}/generate", mock.url()),
        json!({"inputs": "a b", "parameters": {"max_new_tokens": 3}}),
    )
    .await;
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        v["generated_text"]
            .as_str()
            .unwrap()
            .split_whitespace()
            .count(),
        3
    );
    assert!(v.get("details").is_none(), "details only when asked: {v}");
    assert_eq!(mock.stats().requests, 2);
    let info: Value = reqwest::get(format!("{}/info", mock.url()))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(info["model_id"], "cicada-mock");
}

#[tokio::test]
async fn llamacpp_completion_has_counts_and_timings() {
    let mock = start(fast()).await;
    let (_, text) = post(
        &format!("{}/completion", mock.url()),
        json!({"prompt": "x y z", "n_predict": 4, "stream": true}),
    )
    .await;
    let ev = payloads(&text);
    assert_eq!(ev.len(), 5, "{text}");
    assert_eq!(ev[2]["tokens_predicted"], 3);
    assert_eq!(ev[4]["stop"], true);
    assert_eq!(ev[4]["timings"]["predicted_n"], 4);
    assert_eq!(ev[4]["timings"]["prompt_n"], 3);
    assert!(!text.contains("[DONE]"));
    let (_, text) = post(
        &format!("{}/completion", mock.url()),
        json!({"prompt": "x y z", "n_predict": 2}),
    )
    .await;
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["stop"], true);
    assert_eq!(v["content"].as_str().unwrap().split_whitespace().count(), 2);
}

#[tokio::test]
async fn llamacpp_dialect_on_openai_routes() {
    let mock = start(MockConfig {
        api: MockApi::LlamacppChat,
        ..fast()
    })
    .await;
    let (_, text) = post(
        &format!("{}/v1/chat/completions", mock.url()),
        json!({"messages": [{"role": "user", "content": "hi there"}], "max_tokens": 3,
               "stream": true, "stream_options": {"include_usage": true}}),
    )
    .await;
    let events: Vec<&str> = text.split("\n\n").filter(|e| !e.is_empty()).collect();
    assert_eq!(events.last(), Some(&"data: [DONE]"));
    let usage: Value = serde_json::from_str(&events[events.len() - 2][6..]).unwrap();
    assert_eq!(usage["usage"]["completion_tokens"], 3);
    assert_eq!(usage["timings"]["predicted_n"], 3);
}

#[tokio::test]
async fn triton_streams_deltas_and_checks_the_model() {
    let mock = start(MockConfig {
        tokens_per_event: 2,
        ..fast()
    })
    .await;
    let url = format!("{}/v2/models/cicada-mock/generate_stream", mock.url());
    let (status, text) = post(
        &url,
        json!({"text_input": "p q", "max_tokens": 5, "stream": true}),
    )
    .await;
    assert_eq!(status, 200);
    let ev = payloads(&text);
    assert_eq!(ev.len(), 3);
    let words: usize = ev
        .iter()
        .map(|e| {
            e["text_output"]
                .as_str()
                .unwrap()
                .split_whitespace()
                .count()
        })
        .sum();
    assert_eq!(words, 5);
    let (_, text) = post(
        &format!("{}/v2/models/cicada-mock/versions/1/generate", mock.url()),
        json!({"text_input": "p q", "max_tokens": 2}),
    )
    .await;
    let v: Value = serde_json::from_str(&text).unwrap();
    assert!(v["text_output"].as_str().unwrap().starts_with("p q"));
    let (status, text) = post(
        &format!("{}/v2/models/other/generate_stream", mock.url()),
        json!({"text_input": "p", "max_tokens": 2}),
    )
    .await;
    assert_eq!(status, 400);
    assert!(text.contains("unknown model"), "{text}");
    let c = reqwest::Client::new();
    let ready = c
        .get(format!("{}/v2/health/ready", mock.url()))
        .send()
        .await
        .unwrap();
    assert_eq!(ready.status(), 200);
    let index: Value = c
        .post(format!("{}/v2/repository/index", mock.url()))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(index[0]["name"], "cicada-mock");
}

fn metric(text: &str, name: &str) -> f64 {
    text.lines()
        .find(|l| l.starts_with(name) && l[name.len()..].starts_with('{'))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{name} missing:\n{text}"))
}

#[tokio::test]
async fn metrics_follow_what_the_mock_did_and_probes_stay_out_of_the_stats() {
    let mock = start(MockConfig {
        tokens_per_event: 3,
        spec_tokens: 4,
        kv_cache_tokens: 50,
        ..fast()
    })
    .await;
    let prefix = "w ".repeat(32);
    let c = reqwest::Client::new();
    for i in 0..3 {
        let body = json!({"prompt": format!("{prefix} tail{i}"), "max_tokens": 7, "stream": true});
        let mut req = c.post(format!("{}/v1/completions", mock.url())).json(&body);
        if i == 0 {
            req = req.header(PROBE_HEADER, "ready");
        }
        req.send().await.unwrap().text().await.unwrap();
    }
    let text = c
        .get(format!("{}/metrics", mock.url()))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    // every request (probe included) counts on the server side
    assert_eq!(metric(&text, "vllm:prompt_tokens_total"), 99.0);
    assert_eq!(metric(&text, "vllm:generation_tokens_total"), 21.0);
    assert_eq!(metric(&text, "vllm:prefix_cache_queries_total"), 99.0);
    // the second and third prompts share two 16-token blocks with the first
    assert_eq!(metric(&text, "vllm:prefix_cache_hits_total"), 64.0);
    // 7 tokens in events of 3, 3, 1: two speculative steps of 4 proposals
    assert_eq!(metric(&text, "vllm:spec_decode_num_drafts_total"), 6.0);
    assert_eq!(
        metric(&text, "vllm:spec_decode_num_draft_tokens_total"),
        24.0
    );
    assert_eq!(
        metric(&text, "vllm:spec_decode_num_accepted_tokens_total"),
        6.0
    );
    // 33 prompt + 7 output tokens never fit twice in a 50-token cache, but one at a time does
    assert_eq!(metric(&text, "vllm:num_preemptions_total"), 0.0);
    assert_eq!(metric(&text, "vllm:time_to_first_token_seconds_count"), 3.0);
    assert!(text.contains("finished_reason=\"length\"} 3.0"), "{text}");
    assert_eq!(metric(&text, "vllm:kv_cache_usage_perc"), 0.0);
    let stats = mock.stats();
    assert_eq!(stats.requests, 2);
    assert_eq!(stats.probes, 1);
    assert_eq!(stats.output_tokens, 14);
    assert_eq!(stats.spec_drafts, 4);
    assert_eq!(stats.cached_tokens, 64);
    assert!(
        stats.max_kv_usage > 0.79 && stats.max_kv_usage <= 1.0,
        "{stats:?}"
    );
}

#[tokio::test]
async fn concurrent_requests_that_overfill_the_cache_count_preemptions() {
    let mock = start(MockConfig {
        ttft_ms: 50.0,
        kv_cache_tokens: 20,
        ..fast()
    })
    .await;
    let url = format!("{}/v1/completions", mock.url());
    let sends: Vec<_> = (0..3)
        .map(|_| {
            let url = url.clone();
            tokio::spawn(async move {
                post(&url, json!({"prompt": "a b c d e", "max_tokens": 5})).await
            })
        })
        .collect();
    for s in sends {
        assert_eq!(s.await.unwrap().0, 200);
    }
    // each needs 10 tokens: the third arrival overfills 20
    assert_eq!(mock.stats().preemptions, 1);
}

#[tokio::test]
async fn serves_https_with_a_given_certificate() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let files = TlsFiles {
        cert_pem: cert.cert.pem().into_bytes(),
        key_pem: cert.signing_key.serialize_pem().into_bytes(),
    };
    let mock = MockServer::start_with(fast(), "127.0.0.1:0".parse().unwrap(), Some(files))
        .await
        .unwrap();
    assert!(mock.url().starts_with("https://localhost:"));
    let trusting = reqwest::Client::builder()
        .tls_certs_only([reqwest::Certificate::from_pem(cert.cert.pem().as_bytes()).unwrap()])
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    let resp = trusting
        .get(format!("{}/health", mock.url()))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let plain = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    assert!(
        plain
            .get(format!("{}/health", mock.url()))
            .send()
            .await
            .is_err(),
        "an unknown self-signed certificate must be refused"
    );
    let bad = MockServer::start_with(
        fast(),
        "127.0.0.1:0".parse().unwrap(),
        Some(TlsFiles {
            cert_pem: b"nope".to_vec(),
            key_pem: b"nope".to_vec(),
        }),
    )
    .await;
    assert!(bad.is_err());
}

#[tokio::test]
async fn an_api_key_guards_the_api_routes_only() {
    let mock = start(MockConfig {
        api_key: Some("sekret".into()),
        ..fast()
    })
    .await;
    let c = reqwest::Client::new();
    let url = format!("{}/v1/completions", mock.url());
    let body = json!({"prompt": "a", "max_tokens": 2});
    let denied = c.post(&url).json(&body).send().await.unwrap();
    assert_eq!(denied.status(), 401);
    let wrong = c
        .post(&url)
        .bearer_auth("nope")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), 401);
    let ok = c
        .post(&url)
        .bearer_auth("sekret")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status(), 200);
    for open in ["/health", "/metrics", "/mock/stats"] {
        let r = c.get(format!("{}{open}", mock.url())).send().await.unwrap();
        assert_eq!(r.status(), 200, "{open}");
    }
    let models = c
        .get(format!("{}/v1/models", mock.url()))
        .send()
        .await
        .unwrap();
    assert_eq!(models.status(), 401);
    // the key never leaves the process through the scenario model
    let as_json = serde_json::to_string(mock.config()).unwrap();
    assert!(!as_json.contains("sekret"), "{as_json}");
}

#[tokio::test]
async fn a_modelled_end_of_sequence_ends_outputs_early_on_every_api() {
    let mock = start(MockConfig {
        eos_after_tokens: Some(3),
        ..fast()
    })
    .await;
    let url = mock.url();
    // OpenAI completions, whole: "stop" after 3 tokens unless ignore_eos
    let mut texts = Vec::new();
    for (ignore_eos, tokens, finish) in [(false, 3, "stop"), (true, 9, "length")] {
        let (_, text) = post(
            &format!("{url}/v1/completions"),
            json!({"prompt": "a", "max_tokens": 9, "ignore_eos": ignore_eos}),
        )
        .await;
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["usage"]["completion_tokens"], tokens);
        assert_eq!(v["choices"][0]["finish_reason"], finish);
        texts.push(v["choices"][0]["text"].as_str().unwrap().to_string());
    }
    // OpenAI chat, streamed: the last content chunk says "stop"; min_tokens raises the point
    let (_, text) = post(
        &format!("{url}/v1/chat/completions"),
        json!({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 9, "min_tokens": 5,
               "stream": true, "stream_options": {"include_usage": true}}),
    )
    .await;
    let events: Vec<Value> = text
        .split("\n\n")
        .filter_map(|e| e.strip_prefix("data: "))
        .filter_map(|e| serde_json::from_str(e).ok())
        .collect();
    let finishes: Vec<&Value> = events
        .iter()
        .map(|e| &e["choices"][0]["finish_reason"])
        .filter(|f| f.is_string())
        .collect();
    assert_eq!(finishes, [&json!("stop")]);
    assert_eq!(events.last().unwrap()["usage"]["completion_tokens"], 5);
    // TGI: no ignore_eos; the last token carries finish_reason "eos_token"
    let (_, text) = post(
        &format!("{url}/generate_stream"),
        json!({"inputs": "a b", "parameters": {"max_new_tokens": 9, "details": true}}),
    )
    .await;
    let ev = payloads(&text);
    assert_eq!(ev.len(), 3);
    assert_eq!(ev[2]["details"]["finish_reason"], "eos_token");
    assert_eq!(ev[2]["details"]["generated_tokens"], 3);
    // llama.cpp native: stop_type "eos", or "limit" with ignore_eos
    for (ignore_eos, tokens, stop_type) in [(false, 3, "eos"), (true, 9, "limit")] {
        let (_, text) = post(
            &format!("{url}/completion"),
            json!({"prompt": "a", "n_predict": 9, "stream": true, "ignore_eos": ignore_eos}),
        )
        .await;
        let ev = payloads(&text);
        let last = ev.last().unwrap();
        assert_eq!(last["stop_type"], stop_type);
        assert_eq!(last["tokens_predicted"], tokens);
        assert_eq!(last["generation_settings"]["n_predict"], 9);
    }
    // Triton: the stream just ends sooner; TensorRT-LLM's min_length keeps it going
    for (extra, words) in [(json!({}), 3), (json!({"min_length": 9}), 9)] {
        let mut body = json!({"text_input": "p", "max_tokens": 9, "stream": true});
        for (k, v) in extra.as_object().unwrap() {
            body[k] = v.clone();
        }
        let (_, text) = post(
            &format!("{url}/v2/models/cicada-mock/generate_stream"),
            body,
        )
        .await;
        let n: usize = payloads(&text)
            .iter()
            .map(|e| {
                e["text_output"]
                    .as_str()
                    .unwrap()
                    .split_whitespace()
                    .count()
            })
            .sum();
        assert_eq!(n, words);
    }
    // the log records what was answered, and its fingerprint is what the client read
    let log = mock.requests();
    let outputs: Vec<u32> = log.iter().map(|r| r.output_tokens).collect();
    assert_eq!(outputs, [3, 9, 5, 3, 3, 9, 3, 9]);
    assert_eq!(
        log[0].output_fingerprint,
        cicada_mock::fingerprint(&texts[0])
    );
    assert_eq!(
        log[1].output_fingerprint,
        cicada_mock::fingerprint(&texts[1])
    );
    let metrics = reqwest::get(format!("{url}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains("finished_reason=\"stop\"} 5.0"),
        "{metrics}"
    );
    assert!(
        metrics.contains("finished_reason=\"length\"} 3.0"),
        "{metrics}"
    );
}

#[tokio::test]
async fn the_log_keeps_request_ids_and_chat_messages() {
    let mock = start(fast()).await;
    let resp = reqwest::Client::new()
        .post(format!("{}/v1/chat/completions", mock.url()))
        .header("x-request-id", "cicada-run-7")
        .json(
            &json!({"messages": [{"role": "system", "content": "be brief"},
                                   {"role": "user", "content": [{"type": "text", "text": "hi"}]}],
                      "max_tokens": 2}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let log = mock.requests();
    assert_eq!(log[0].request_id.as_deref(), Some("cicada-run-7"));
    let roles: Vec<&str> = log[0].messages.iter().map(|m| m.role.as_str()).collect();
    assert_eq!(roles, ["system", "user"]);
    assert_eq!(
        log[0].messages[1].fingerprint,
        cicada_mock::fingerprint("hi")
    );
}

#[tokio::test]
async fn prompt_tokens_details_report_cached_tokens_and_the_log_records_them() {
    let words = |n: usize, tag: &str| -> String { (0..n).map(|i| format!("{tag}{i} ")).collect() };
    let shared = words(32, "s");
    let prompts = [
        format!("{shared}{}", words(8, "a")),
        format!("{shared}{}", words(8, "b")),
        // exactly two blocks, both cached: vLLM recomputes the last block
        shared.clone(),
    ];
    for details in [true, false] {
        let mock = start(MockConfig {
            prompt_tokens_details: details,
            ..fast()
        })
        .await;
        let mut reported = Vec::new();
        for p in &prompts {
            let (_, text) = post(
                &format!("{}/v1/chat/completions", mock.url()),
                json!({"messages": [{"role": "user", "content": p}], "max_tokens": 2,
                       "stream": true, "stream_options": {"include_usage": true}}),
            )
            .await;
            let usage = text
                .split("\n\n")
                .filter_map(|e| e.strip_prefix("data: "))
                .filter_map(|e| serde_json::from_str::<Value>(e).ok())
                .find(|v| v["choices"].as_array().is_some_and(Vec::is_empty))
                .unwrap();
            reported.push(usage["usage"]["prompt_tokens_details"]["cached_tokens"].as_u64());
        }
        // like vLLM, details appear only when something was cached
        let expected = if details {
            [None, Some(32), Some(16)]
        } else {
            [None; 3]
        };
        assert_eq!(reported, expected, "prompt_tokens_details={details}");
        let log: Vec<Option<u32>> = mock.requests().iter().map(|r| r.cached_tokens).collect();
        assert_eq!(log, [Some(0), Some(32), Some(16)]);
    }
    let off = start(MockConfig {
        prefix_cache: false,
        ..fast()
    })
    .await;
    post(
        &format!("{}/v1/completions", off.url()),
        json!({"prompt": shared, "max_tokens": 1}),
    )
    .await;
    assert_eq!(off.requests()[0].cached_tokens, None);
}
