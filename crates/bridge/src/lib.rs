//! The scenario in the client's terms: the one place where a resolved
//! target, its sampling and its prompts become what `cicada-client` speaks.
//!
//! The client knows nothing of scenarios or plans, and the scenario crate
//! nothing of connections; the worker (sending load) and the target crate
//! (readiness, `/metrics` scrapes) both need the same mapping, so it lives
//! here, below both. Each function maps one idea; convert once, when a plan
//! or target arrives, never per request.

use cicada_client::backend::{self, ApiCodec, Ask, Message};
use cicada_client::http::{
    self, ApiKey, Client, HeaderSpec, Headers, HttpVersion, Proxy, SetupError, Spread,
};
use cicada_client::tls::TlsSettings;
use cicada_scenarios::dataset::{ChatMessage, Prompt};
use cicada_scenarios::plan::{
    self, AddressChoice, ProxySetting, ResolvedSampling, ResolvedTarget, ServerFamily, WireApi,
};

/// A client for `target`'s connections, as its settings say.
pub fn client(target: &ResolvedTarget) -> Result<Client, SetupError> {
    Client::with(settings(target))
}

/// How a client connects to `target`.
pub fn settings(target: &ResolvedTarget) -> http::Settings {
    http::Settings {
        max_event: usize::try_from(target.max_event_bytes).unwrap_or(usize::MAX),
        http: http_version(target.http),
        addresses: addresses(target.addresses),
        proxy: proxy(&target.proxy),
        no_proxy: target.no_proxy.clone(),
        ..http::Settings::new(&tls(&target.tls), target.keep_alive)
    }
}

/// The headers every request to `target` carries (`key`: whether a missing
/// API key variable is an error).
pub fn headers(target: &ResolvedTarget, key: ApiKey) -> Result<Headers, SetupError> {
    let spec = HeaderSpec {
        fixed: &target.headers,
        api_key_env: target.api_key_env.as_deref(),
        keep_alive: target.keep_alive,
    };
    http::headers(spec, key)
}

/// How to speak `target`'s API with `sampling`.
pub fn codec(target: &ResolvedTarget, sampling: &ResolvedSampling) -> ApiCodec {
    ApiCodec::new(
        wire_api(target.api),
        family(target.family),
        target.model.clone(),
        self::sampling(sampling),
        target.stream,
    )
}

/// One request's question: `prompt` (moved, not copied) and its output limit.
pub fn ask(prompt: Prompt, output_tokens: Option<u32>) -> Ask {
    Ask {
        prompt: match prompt {
            Prompt::Text(t) => backend::Prompt::Text(t),
            Prompt::Chat(msgs) => backend::Prompt::Chat(msgs.into_iter().map(message).collect()),
        },
        output_tokens,
    }
}

/// A dataset's chat message as sent.
fn message(m: ChatMessage) -> Message {
    Message {
        role: m.role,
        content: m.content,
    }
}

/// The trust settings of `target.tls_ca` and `target.tls_insecure`.
pub fn tls(t: &plan::TlsSettings) -> TlsSettings {
    TlsSettings {
        ca_pem: t.ca_pem.clone(),
        insecure: t.insecure,
    }
}

fn wire_api(api: WireApi) -> backend::WireApi {
    match api {
        WireApi::Completions => backend::WireApi::Completions,
        WireApi::Chat => backend::WireApi::Chat,
        WireApi::Tgi => backend::WireApi::Tgi,
        WireApi::LlamaCpp => backend::WireApi::LlamaCpp,
        WireApi::Triton => backend::WireApi::Triton,
    }
}

fn family(f: ServerFamily) -> backend::ServerFamily {
    match f {
        ServerFamily::Openai => backend::ServerFamily::Openai,
        ServerFamily::Vllm => backend::ServerFamily::Vllm,
        ServerFamily::Sglang => backend::ServerFamily::Sglang,
        ServerFamily::Mock => backend::ServerFamily::Mock,
        ServerFamily::Tgi => backend::ServerFamily::Tgi,
        ServerFamily::LlamaCpp => backend::ServerFamily::LlamaCpp,
        ServerFamily::Triton => backend::ServerFamily::Triton,
    }
}

fn sampling(s: &ResolvedSampling) -> backend::Sampling {
    backend::Sampling {
        temperature: s.temperature,
        top_p: s.top_p,
        top_k: s.top_k,
        ignore_eos: s.ignore_eos,
        min_tokens: s.min_tokens,
        extra_body: s.extra_body.clone(),
    }
}

fn http_version(v: plan::HttpVersion) -> HttpVersion {
    match v {
        plan::HttpVersion::Auto => HttpVersion::Auto,
        plan::HttpVersion::Http1 => HttpVersion::Http1,
        plan::HttpVersion::Http2 => HttpVersion::Http2,
    }
}

fn addresses(a: AddressChoice) -> Spread {
    match a {
        AddressChoice::First => Spread::First,
        AddressChoice::Spread => Spread::Spread,
    }
}

fn proxy(p: &ProxySetting) -> Proxy {
    match p {
        ProxySetting::Env => Proxy::Env,
        ProxySetting::None => Proxy::None,
        ProxySetting::Url(u) => Proxy::Url(u.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The client's default limit is the scenario's default `target.max_event_size`.
    #[test]
    fn both_sides_default_to_one_max_event_size() {
        let scenario = cicada_scenarios::scenario::DEFAULT_MAX_EVENT_SIZE.get();
        assert_eq!(http::DEFAULT_MAX_EVENT as u64, scenario);
    }

    /// A chat prompt keeps its messages in order, roles and text as they were.
    #[test]
    fn prompts_keep_their_messages() {
        let chat = Prompt::Chat(vec![
            ChatMessage {
                role: "system".into(),
                content: "be brief".into(),
            },
            ChatMessage {
                role: "user".into(),
                content: "hi".into(),
            },
        ]);
        let a = ask(chat.clone(), Some(3));
        assert_eq!(a.output_tokens, Some(3));
        assert_eq!(a.prompt.text(), chat.text());
        match a.prompt {
            backend::Prompt::Chat(m) => {
                assert_eq!(
                    (m[0].role.as_str(), m[1].content.as_str()),
                    ("system", "hi")
                )
            }
            other => panic!("{other:?}"),
        }
    }
}
