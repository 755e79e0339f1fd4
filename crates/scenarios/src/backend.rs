//! `target.backend`: the serving APIs cicada speaks, by their scenario
//! names, and what each implies for the workload (pooling, chat messages,
//! audio, the spelling of tools and images, `ignore_eos`).

use cicada_request::Spelling;
use serde::{Deserialize, Serialize};

use cicada_mock::MockApi;

/// The serving API spoken to the target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Backend {
    /// OpenAI `/v1/completions`.
    Openai,
    /// OpenAI `/v1/chat/completions`.
    #[default]
    OpenaiChat,
    /// vLLM's OpenAI completions with its extras (`ignore_eos`, `min_tokens`).
    Vllm,
    /// vLLM's OpenAI chat completions with its extras.
    VllmChat,
    /// SGLang's OpenAI completions with its extras.
    Sglang,
    /// SGLang's OpenAI chat completions with its extras.
    SglangChat,
    /// HuggingFace TGI's native `/generate_stream` (token events, `details`).
    Tgi,
    /// llama.cpp's native `/completion` (`n_predict`, `timings`).
    Llamacpp,
    /// llama.cpp's OpenAI chat route (`ignore_eos`, `timings`).
    LlamacppChat,
    /// llama.cpp's OpenAI completions route (`ignore_eos`, `timings`).
    LlamacppCompletions,
    /// NVIDIA Triton's generate extension (TensorRT-LLM or vLLM backend).
    Triton,
    /// The built-in mock, started in-process (its API is `mock.api`).
    Mock,
    /// OpenAI's Responses API, `/v1/responses` (vLLM's `openai-responses`;
    /// vLLM and llama-server serve it too).
    OpenaiResponses,
    /// Anthropic's Messages API, `/v1/messages` (vLLM and llama-server serve it too).
    AnthropicMessages,
    /// OpenAI `/v1/audio/transcriptions` (vLLM's `openai-audio`): multipart
    /// uploads of the `audio` workload's clips.
    OpenaiAudio,
    /// OpenAI `/v1/embeddings` (vLLM's `openai-embeddings`; llama-server
    /// with `--embeddings` serves it too): `[pooling]` batches of inputs.
    OpenaiEmbeddings,
    /// vLLM's `/v1/rerank` (`vllm-rerank`; llama-server with `--reranking`
    /// serves the same shape): a query and `[pooling]` documents per request.
    VllmRerank,
    /// HuggingFace TEI's `/embed`: `[pooling]` batches of `inputs`.
    TeiEmbed,
    /// HuggingFace TEI's `/rerank`: a query and `[pooling]` `texts` per request.
    TeiRerank,
    /// vLLM's `/pooling` (`vllm-pooling`): `[pooling]` batches of `input`
    /// texts, one pooled output each (embeddings' shape).
    VllmPooling,
    /// vLLM's `/score` (`vllm-score`): a query (`text_1`) and `[pooling]`
    /// documents (`text_2`) per request, a score each.
    VllmScore,
}

impl Backend {
    /// Name as written in scenario files.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Openai => "openai",
            Backend::OpenaiChat => "openai-chat",
            Backend::Vllm => "vllm",
            Backend::VllmChat => "vllm-chat",
            Backend::Sglang => "sglang",
            Backend::SglangChat => "sglang-chat",
            Backend::Tgi => "tgi",
            Backend::Llamacpp => "llamacpp",
            Backend::LlamacppChat => "llamacpp-chat",
            Backend::LlamacppCompletions => "llamacpp-completions",
            Backend::Triton => "triton",
            Backend::Mock => "mock",
            Backend::OpenaiResponses => "openai-responses",
            Backend::AnthropicMessages => "anthropic-messages",
            Backend::OpenaiAudio => "openai-audio",
            Backend::OpenaiEmbeddings => "openai-embeddings",
            Backend::VllmRerank => "vllm-rerank",
            Backend::TeiEmbed => "tei-embed",
            Backend::TeiRerank => "tei-rerank",
            Backend::VllmPooling => "vllm-pooling",
            Backend::VllmScore => "vllm-score",
        }
    }

    /// Every backend, in the order documentation lists them.
    pub const ALL: [Backend; 21] = [
        Backend::Openai,
        Backend::OpenaiChat,
        Backend::Vllm,
        Backend::VllmChat,
        Backend::Sglang,
        Backend::SglangChat,
        Backend::Tgi,
        Backend::Llamacpp,
        Backend::LlamacppChat,
        Backend::LlamacppCompletions,
        Backend::Triton,
        Backend::Mock,
        Backend::OpenaiResponses,
        Backend::AnthropicMessages,
        Backend::OpenaiAudio,
        Backend::OpenaiEmbeddings,
        Backend::VllmRerank,
        Backend::TeiEmbed,
        Backend::TeiRerank,
        Backend::VllmPooling,
        Backend::VllmScore,
    ];

    /// A pooling API (embeddings, rerank): each request sends a `[pooling]`
    /// batch of texts (or a query and documents) and nothing is generated;
    /// `mock_api` decides for the embedded mock.
    pub fn pools(self, mock_api: MockApi) -> bool {
        match self {
            Backend::OpenaiEmbeddings
            | Backend::VllmRerank
            | Backend::TeiEmbed
            | Backend::TeiRerank
            | Backend::VllmPooling
            | Backend::VllmScore => true,
            Backend::Mock => mock_api.pools(),
            _ => false,
        }
    }

    /// A rerank API: each request sends a query and `[pooling]` documents;
    /// `mock_api` decides for the embedded mock.
    pub fn reranks(self, mock_api: MockApi) -> bool {
        match self {
            Backend::VllmRerank | Backend::TeiRerank | Backend::VllmScore => true,
            Backend::Mock => mock_api.reranks(),
            _ => false,
        }
    }

    /// `[pooling]`'s `encoding_format` and `dimensions` apply (OpenAI's
    /// embeddings shape, which vLLM's `/pooling` takes too); `mock_api`
    /// decides for the embedded mock.
    pub fn shapes_vectors(self, mock_api: MockApi) -> bool {
        match self {
            Backend::OpenaiEmbeddings | Backend::VllmPooling => true,
            Backend::Mock => matches!(mock_api, MockApi::OpenaiEmbeddings | MockApi::VllmPooling),
            _ => false,
        }
    }

    /// Requests go out as chat `messages` (an OpenAI chat route); `mock_api`
    /// decides for the embedded mock.
    pub fn sends_messages(self, mock_api: MockApi) -> bool {
        match self {
            Backend::OpenaiChat
            | Backend::VllmChat
            | Backend::SglangChat
            | Backend::LlamacppChat
            | Backend::OpenaiResponses
            | Backend::AnthropicMessages => true,
            Backend::Mock => mock_api.sends_messages(),
            _ => false,
        }
    }

    /// The spelling of tools, response formats and images the backend's
    /// API takes (chat completions, Responses or Messages), if it takes any;
    /// `mock_api` decides for the embedded mock.
    pub fn spelling(self, mock_api: MockApi) -> Option<Spelling> {
        match self {
            Backend::OpenaiChat
            | Backend::VllmChat
            | Backend::SglangChat
            | Backend::LlamacppChat => Some(Spelling::Chat),
            Backend::OpenaiResponses => Some(Spelling::Responses),
            Backend::AnthropicMessages => Some(Spelling::Messages),
            Backend::Mock => match mock_api {
                MockApi::OpenaiChat | MockApi::LlamacppChat => Some(Spelling::Chat),
                MockApi::OpenaiResponses => Some(Spelling::Responses),
                MockApi::AnthropicMessages => Some(Spelling::Messages),
                _ => None,
            },
            _ => None,
        }
    }

    /// The API's `prompt` may be token ids (OpenAI completions, as vLLM,
    /// SGLang and llama-server serve them, and llama.cpp's `/completion`);
    /// `mock_api` decides for the embedded mock.
    pub fn takes_token_ids(self, mock_api: MockApi) -> bool {
        match self {
            Backend::Openai
            | Backend::Vllm
            | Backend::Sglang
            | Backend::Llamacpp
            | Backend::LlamacppCompletions => true,
            Backend::Mock => matches!(
                mock_api,
                MockApi::Openai | MockApi::Llamacpp | MockApi::LlamacppCompletions
            ),
            _ => false,
        }
    }

    /// Requests go out as audio uploads (a transcription route); the
    /// embedded mock speaks no transcription API of its own.
    pub fn sends_audio(self, _mock_api: MockApi) -> bool {
        self == Backend::OpenaiAudio
    }

    /// Whether `ignore_eos` is sent by default for synthetic workloads: the
    /// servers that understand it. Plain OpenAI servers may reject an unknown
    /// field, so for `openai`/`openai-chat` it is sent only when asked for
    /// (`sampling.ignore_eos = true` or `--ignore-eos`, as `vllm bench serve`
    /// sends it); TGI and Anthropic Messages have no such field, nor has
    /// OpenAI's own Responses API (vLLM's and llama-server's have).
    pub fn ignore_eos_by_default(self) -> bool {
        !matches!(
            self,
            Backend::Openai
                | Backend::OpenaiChat
                | Backend::Tgi
                | Backend::OpenaiResponses
                | Backend::AnthropicMessages
                | Backend::OpenaiAudio
                | Backend::OpenaiEmbeddings
                | Backend::VllmRerank
                | Backend::TeiEmbed
                | Backend::TeiRerank
                | Backend::VllmPooling
                | Backend::VllmScore
        )
    }

    /// The backend a name (as in scenario files) stands for.
    pub fn from_name(name: &str) -> Option<Backend> {
        Backend::ALL.into_iter().find(|b| b.name() == name)
    }
}
