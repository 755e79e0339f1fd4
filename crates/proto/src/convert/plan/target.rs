//! The target a plan aims at, its sampling parameters and its SLO bounds, to
//! and from the wire.

use std::collections::BTreeMap;

use cicada_metrics::Slo;
use cicada_plan::{
    AddressChoice, HttpVersion, ModelAssignment, ProxySetting, ResolvedSampling, ResolvedTarget,
    Routing, ServerFamily, TlsSettings, WeightedModel, WireApi,
};

use super::PlanError;
use crate::v1;

pub(super) fn target(t: &ResolvedTarget) -> v1::Target {
    v1::Target {
        api: match t.api {
            WireApi::Completions => v1::WireApi::Completions,
            WireApi::Chat => v1::WireApi::Chat,
            WireApi::Tgi => v1::WireApi::Tgi,
            WireApi::LlamaCpp => v1::WireApi::LlamaCpp,
            WireApi::Triton => v1::WireApi::Triton,
            WireApi::Responses => v1::WireApi::Responses,
            WireApi::Messages => v1::WireApi::Messages,
            WireApi::Transcription => v1::WireApi::Transcription,
            WireApi::Embeddings => v1::WireApi::Embeddings,
            WireApi::Rerank => v1::WireApi::Rerank,
            WireApi::TeiEmbed => v1::WireApi::TeiEmbed,
            WireApi::TeiRerank => v1::WireApi::TeiRerank,
            WireApi::Pooling => v1::WireApi::Pooling,
            WireApi::Score => v1::WireApi::Score,
        } as i32,
        family: match t.family {
            ServerFamily::Openai => v1::ServerFamily::Openai,
            ServerFamily::Vllm => v1::ServerFamily::Vllm,
            ServerFamily::Sglang => v1::ServerFamily::Sglang,
            ServerFamily::Mock => v1::ServerFamily::Mock,
            ServerFamily::Tgi => v1::ServerFamily::Tgi,
            ServerFamily::LlamaCpp => v1::ServerFamily::LlamaCpp,
            ServerFamily::Triton => v1::ServerFamily::Triton,
        } as i32,
        urls: t.urls.clone(),
        model: t.model.clone(),
        headers: t.headers.clone().into_iter().collect(),
        api_key_env: t.api_key_env.clone(),
        timeout_ms: t.timeout_ms,
        stream: t.stream,
        routing: match t.routing {
            Routing::RoundRobin => v1::Routing::RoundRobin,
            Routing::Random => v1::Routing::Random,
            Routing::LeastInFlight => v1::Routing::LeastInFlight,
        } as i32,
        tls_ca_pem: t.tls.ca_pem.clone(),
        tls_insecure: t.tls.insecure,
        keep_alive: t.keep_alive,
        max_event_bytes: t.max_event_bytes,
        http: match t.http {
            HttpVersion::Auto => v1::HttpVersion::Auto,
            HttpVersion::Http1 => v1::HttpVersion::Http1,
            HttpVersion::Http2 => v1::HttpVersion::Http2,
        } as i32,
        addresses: match t.addresses {
            AddressChoice::First => v1::AddressChoice::First,
            AddressChoice::Spread => v1::AddressChoice::Spread,
        } as i32,
        proxy: match &t.proxy {
            ProxySetting::Env => "env".to_string(),
            ProxySetting::None => "none".to_string(),
            ProxySetting::Url(u) => u.clone(),
        },
        no_proxy: t.no_proxy.clone(),
        models: t
            .models
            .iter()
            .map(|m| v1::WeightedModel {
                name: m.name.clone(),
                weight: m.weight,
                lora_id: m.lora_id,
            })
            .collect(),
        model_assignment: match t.model_assignment {
            ModelAssignment::Random => v1::ModelAssignment::Random,
            ModelAssignment::RoundRobin => v1::ModelAssignment::RoundRobin,
        } as i32,
    }
}

pub(super) fn target_from(t: v1::Target) -> Result<ResolvedTarget, PlanError> {
    let unknown = |field: &'static str, value: i32| PlanError::Unknown { field, value };
    Ok(ResolvedTarget {
        api: match v1::WireApi::try_from(t.api) {
            Ok(v1::WireApi::Completions) => WireApi::Completions,
            Ok(v1::WireApi::Chat) => WireApi::Chat,
            Ok(v1::WireApi::Tgi) => WireApi::Tgi,
            Ok(v1::WireApi::LlamaCpp) => WireApi::LlamaCpp,
            Ok(v1::WireApi::Triton) => WireApi::Triton,
            Ok(v1::WireApi::Responses) => WireApi::Responses,
            Ok(v1::WireApi::Messages) => WireApi::Messages,
            Ok(v1::WireApi::Transcription) => WireApi::Transcription,
            Ok(v1::WireApi::Embeddings) => WireApi::Embeddings,
            Ok(v1::WireApi::Rerank) => WireApi::Rerank,
            Ok(v1::WireApi::TeiEmbed) => WireApi::TeiEmbed,
            Ok(v1::WireApi::TeiRerank) => WireApi::TeiRerank,
            Ok(v1::WireApi::Pooling) => WireApi::Pooling,
            Ok(v1::WireApi::Score) => WireApi::Score,
            Ok(v1::WireApi::Unspecified) | Err(_) => return Err(unknown("target.api", t.api)),
        },
        family: match v1::ServerFamily::try_from(t.family) {
            Ok(v1::ServerFamily::Openai) => ServerFamily::Openai,
            Ok(v1::ServerFamily::Vllm) => ServerFamily::Vllm,
            Ok(v1::ServerFamily::Sglang) => ServerFamily::Sglang,
            Ok(v1::ServerFamily::Mock) => ServerFamily::Mock,
            Ok(v1::ServerFamily::Tgi) => ServerFamily::Tgi,
            Ok(v1::ServerFamily::LlamaCpp) => ServerFamily::LlamaCpp,
            Ok(v1::ServerFamily::Triton) => ServerFamily::Triton,
            Ok(v1::ServerFamily::Unspecified) | Err(_) => {
                return Err(unknown("target.family", t.family));
            }
        },
        urls: t.urls,
        model: t.model,
        models: t
            .models
            .into_iter()
            .map(|m| WeightedModel {
                name: m.name,
                weight: m.weight,
                lora_id: m.lora_id,
            })
            .collect(),
        model_assignment: match v1::ModelAssignment::try_from(t.model_assignment) {
            Ok(v1::ModelAssignment::Random) => ModelAssignment::Random,
            Ok(v1::ModelAssignment::RoundRobin) => ModelAssignment::RoundRobin,
            Ok(v1::ModelAssignment::Unspecified) | Err(_) => {
                return Err(unknown("target.model_assignment", t.model_assignment));
            }
        },
        headers: t.headers.into_iter().collect(),
        api_key_env: t.api_key_env,
        timeout_ms: t.timeout_ms,
        stream: t.stream,
        routing: match v1::Routing::try_from(t.routing) {
            Ok(v1::Routing::RoundRobin) => Routing::RoundRobin,
            Ok(v1::Routing::Random) => Routing::Random,
            Ok(v1::Routing::LeastInFlight) => Routing::LeastInFlight,
            Ok(v1::Routing::Unspecified) | Err(_) => {
                return Err(unknown("target.routing", t.routing));
            }
        },
        tls: TlsSettings {
            ca_pem: t.tls_ca_pem,
            insecure: t.tls_insecure,
        },
        keep_alive: t.keep_alive,
        max_event_bytes: t.max_event_bytes,
        http: match v1::HttpVersion::try_from(t.http) {
            Ok(v1::HttpVersion::Auto) => HttpVersion::Auto,
            Ok(v1::HttpVersion::Http1) => HttpVersion::Http1,
            Ok(v1::HttpVersion::Http2) => HttpVersion::Http2,
            Ok(v1::HttpVersion::Unspecified) | Err(_) => {
                return Err(unknown("target.http", t.http));
            }
        },
        addresses: match v1::AddressChoice::try_from(t.addresses) {
            Ok(v1::AddressChoice::First) => AddressChoice::First,
            Ok(v1::AddressChoice::Spread) => AddressChoice::Spread,
            Ok(v1::AddressChoice::Unspecified) | Err(_) => {
                return Err(unknown("target.addresses", t.addresses));
            }
        },
        proxy: match t.proxy.as_str() {
            "env" => ProxySetting::Env,
            "none" => ProxySetting::None,
            _ => ProxySetting::Url(t.proxy),
        },
        no_proxy: t.no_proxy,
    })
}

pub(super) fn sampling(s: &ResolvedSampling) -> v1::Sampling {
    v1::Sampling {
        temperature: s.temperature,
        top_p: s.top_p,
        top_k: s.top_k,
        ignore_eos: s.ignore_eos,
        min_tokens: s.min_tokens,
        extra_body_json: s
            .extra_body
            .iter()
            .map(|(k, v)| (k.clone(), v.to_string()))
            .collect(),
    }
}

pub(super) fn sampling_from(s: v1::Sampling) -> Result<ResolvedSampling, PlanError> {
    let extra_body = s
        .extra_body_json
        .into_iter()
        .map(|(key, text)| match serde_json::from_str(&text) {
            Ok(v) => Ok((key, v)),
            Err(e) => Err(PlanError::ExtraBody {
                key,
                error: e.to_string(),
            }),
        })
        .collect::<Result<BTreeMap<_, _>, _>>()?;
    Ok(ResolvedSampling {
        temperature: s.temperature,
        top_p: s.top_p,
        top_k: s.top_k,
        ignore_eos: s.ignore_eos,
        min_tokens: s.min_tokens,
        extra_body,
    })
}

pub(super) fn slo(s: &Slo) -> v1::Slo {
    v1::Slo {
        ttft_ms: s.ttft_ms,
        tpot_ms: s.tpot_ms,
        e2el_ms: s.e2el_ms,
        itl_ms: s.itl_ms,
        ttfa_ms: s.ttfa_ms,
        min_attainment: s.min_attainment,
    }
}

pub(super) fn slo_from(s: v1::Slo) -> Slo {
    Slo {
        ttft_ms: s.ttft_ms,
        tpot_ms: s.tpot_ms,
        e2el_ms: s.e2el_ms,
        itl_ms: s.itl_ms,
        ttfa_ms: s.ttfa_ms,
        min_attainment: s.min_attainment,
    }
}
