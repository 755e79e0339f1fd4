//! Talking to a real server without cicada: one raw request and its SSE
//! payloads, the ground truth a test holds cicada's figures against.

use serde_json::Value;

/// POST a JSON body and return the status and the raw response text.
pub fn post(url: &str, body: &Value) -> (u16, String) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let resp = reqwest::Client::new()
            .post(url)
            .json(body)
            .send()
            .await
            .unwrap();
        let status = resp.status().as_u16();
        (status, resp.text().await.unwrap())
    })
}

/// The JSON payloads of an SSE body (`[DONE]` left out).
pub fn events(text: &str) -> Vec<Value> {
    text.lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter(|d| *d != "[DONE]")
        .map(|d| serde_json::from_str(d).unwrap())
        .collect()
}
