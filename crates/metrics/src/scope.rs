/// What a set of measurements covers: one target, one model, one workload, one `[[stages]]` stage, and
/// whether it is warm-up (reported apart, never in the results).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Scope {
    /// Target (replica) index.
    pub target: u32,
    /// Model index of `target.models` (0 with one model).
    pub model: u32,
    /// Workload index of `[[workloads]]` (0 without workloads).
    pub workload: u32,
    /// Stage index of `[[stages]]` (0 without stages).
    pub stage: u32,
    /// Warm-up requests.
    pub warmup: bool,
}
