//! Triton's generate extension as TensorRT-LLM's ensemble answers it: one
//! event per step with the new text in `text_output`, no end marker (the
//! stream just closes).

use std::fmt::Write as _;

use super::{Reply, token_text};

/// Triton's in-band error object.
pub(super) const ERROR_EVENT: &str = "data: {\"error\":\"mock injected error\"}\n\n";

/// One event with the step's text (a delta).
pub(super) fn step(r: &Reply, out: &mut String, first: u32, n: u32) {
    let mut text = String::with_capacity(8 * n as usize);
    token_text(&mut text, r.seq, first, n);
    let _ = write!(
        out,
        "data: {{\"context_logits\":0.0,\"cum_log_probs\":0.0,\"generation_logits\":0.0,\"model_name\":{},\"model_version\":\"1\",\"output_log_probs\":[0.0],\"sequence_end\":false,\"sequence_id\":0,\"sequence_start\":false,\"text_output\":\"{text}\"}}\n\n",
        r.model_json
    );
}

/// `/generate`: the whole text, after the prompt unless the client excluded it.
pub(super) fn full(r: &Reply, out: &mut String, text: &str, prompt: Option<&str>) {
    let mut output = String::new();
    if let Some(p) = prompt {
        output.push_str(p);
    }
    output.push_str(text);
    let quoted = serde_json::to_string(&output).unwrap_or_else(|_| "\"\"".to_string());
    let _ = write!(
        out,
        "{{\"model_name\":{},\"model_version\":\"1\",\"text_output\":{quoted}}}",
        r.model_json
    );
}
