//! A request's conversation, images and output shape as the API it goes to
//! spells them (the three spellings are `cicada_request::Spelling`'s; this
//! is only where a pool entry meets them).

use cicada_request::{Prompt, Spelling};
use serde_json::{Map, Value, json};

use super::Ask;

/// The request's images as `data:` URLs, in order.
pub(super) fn image_urls(entry: &Ask) -> Vec<String> {
    entry
        .media
        .images
        .iter()
        .map(super::media::data_url)
        .collect()
}

/// The conversation as a list of messages (plain text is one user
/// message), with the images after the last user message's text.
pub(super) fn messages(sp: Spelling, entry: &Ask) -> Vec<Value> {
    let mut list = match &entry.prompt {
        Prompt::Text(_) | Prompt::Batch(_) | Prompt::Rerank { .. } | Prompt::Tokens(_) => {
            vec![json!({"role": "user", "content": entry.prompt.text()})]
        }
        Prompt::Chat(msgs) => msgs.iter().map(|m| json!(m)).collect(),
    };
    sp.put_images(&mut list, image_urls(entry));
    list
}

/// Add the request's tools, tool choice and response format, unless the
/// shape is only checked.
pub(super) fn shape(sp: Spelling, m: &mut Map<String, Value>, entry: &Ask) {
    if let Some(s) = entry.structured.as_deref()
        && !s.shape.check_only
    {
        sp.put_shape(m, &s.shape);
    }
}
