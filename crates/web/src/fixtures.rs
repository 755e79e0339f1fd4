//! Test fixtures the web module's tests share.

use cicada_metrics::MetricSet;
use cicada_results::RunResult;
use cicada_scenarios::Scenario;

/// A step's result with nothing measured, one replica and no models.
pub fn result() -> RunResult {
    use cicada_plan::{
        AddressChoice, HttpVersion, ProxySetting, ResolvedTarget, ServerFamily, WireApi,
    };
    RunResult {
        scenario: Scenario::default(),
        scenario_origin: "test".into(),
        scenario_hash: "h".into(),
        stage: 0,
        stage_name: String::new(),
        proxy_routes: Vec::new(),
        target: ResolvedTarget {
            api: WireApi::Chat,
            family: ServerFamily::Mock,
            urls: vec!["http://t".into()],
            model: "m".into(),
            models: Vec::new(),
            model_assignment: Default::default(),
            headers: Default::default(),
            api_key_env: None,
            timeout_ms: 1,
            stream: true,
            routing: Default::default(),
            tls: Default::default(),
            keep_alive: true,
            http: HttpVersion::Auto,
            addresses: AddressChoice::First,
            proxy: ProxySetting::Env,
            no_proxy: Vec::new(),
            max_event_bytes: 1 << 20,
        },
        workers: 1,
        per_target: Vec::new(),
        per_model: Vec::new(),
        per_workload: Vec::new(),
        total: MetricSet::default(),
        warmup: MetricSet::default(),
        window_start_us: 0,
        rows: Vec::new(),
        lost: Vec::new(),
        worker_shares: Vec::new(),
        interrupted: None,
        planned: 0,
        started_unix: 0.0,
        dataset: Default::default(),
        server: Default::default(),
        client: None,
        hooks: Vec::new(),
        steady: None,
        saturated: None,
        aborted: None,
        skipped: Vec::new(),
    }
}
