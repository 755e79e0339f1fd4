//! The statistics behind `cicada compare`: Student's t distribution (its
//! CDF through the regularized incomplete beta function, its quantiles by
//! bisection on the CDF, exact to 1e-10 for any degrees of freedom, so a
//! Welch–Satterthwaite fractional one too), the mean and sample standard
//! deviation, Welch's test on two sets of run figures, and a percentile
//! bootstrap over per-request samples.

use rand::{Rng as _, SeedableRng as _};

/// ln Γ(x) for x > 0: Lanczos' approximation (g = 7, 9 terms), relative
/// error below 1e-14 over the range the t distribution needs.
fn ln_gamma(x: f64) -> f64 {
    const G: f64 = 7.0;
    const C: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    if x < 0.5 {
        // reflection: Γ(x) Γ(1 − x) = π / sin(πx)
        let pi = std::f64::consts::PI;
        return (pi / (pi * x).sin()).ln() - ln_gamma(1.0 - x);
    }
    let x = x - 1.0;
    let mut a = C[0];
    for (i, c) in C.iter().enumerate().skip(1) {
        a += c / (x + i as f64);
    }
    let t = x + G + 0.5;
    0.5 * (2.0 * std::f64::consts::PI).ln() + (x + 0.5) * t.ln() - t + a.ln()
}

/// The continued fraction of the incomplete beta function (modified Lentz).
fn beta_fraction(a: f64, b: f64, x: f64) -> f64 {
    const TINY: f64 = 1e-300;
    let (qab, qap, qam) = (a + b, a + 1.0, a - 1.0);
    let mut c = 1.0;
    let mut d = 1.0 - qab * x / qap;
    if d.abs() < TINY {
        d = TINY;
    }
    d = 1.0 / d;
    let mut h = d;
    for m in 1..=300 {
        let m = f64::from(m);
        let m2 = 2.0 * m;
        let aa = m * (b - m) * x / ((qam + m2) * (a + m2));
        d = 1.0 + aa * d;
        d = if d.abs() < TINY { TINY } else { d };
        c = 1.0 + aa / c;
        c = if c.abs() < TINY { TINY } else { c };
        d = 1.0 / d;
        h *= d * c;
        let aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2));
        d = 1.0 + aa * d;
        d = if d.abs() < TINY { TINY } else { d };
        c = 1.0 + aa / c;
        c = if c.abs() < TINY { TINY } else { c };
        d = 1.0 / d;
        let del = d * c;
        h *= del;
        if (del - 1.0).abs() < 1e-15 {
            break;
        }
    }
    h
}

/// The regularized incomplete beta function I_x(a, b).
fn incomplete_beta(a: f64, b: f64, x: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    if x >= 1.0 {
        return 1.0;
    }
    let front =
        (ln_gamma(a + b) - ln_gamma(a) - ln_gamma(b) + a * x.ln() + b * (1.0 - x).ln()).exp();
    if x < (a + 1.0) / (a + b + 2.0) {
        front * beta_fraction(a, b, x) / a
    } else {
        1.0 - front * beta_fraction(b, a, 1.0 - x) / b
    }
}

/// P(T ≤ t) for Student's t with `df` degrees of freedom (df > 0).
pub fn t_cdf(t: f64, df: f64) -> f64 {
    let tail = 0.5 * incomplete_beta(df / 2.0, 0.5, df / (df + t * t));
    if t >= 0.0 { 1.0 - tail } else { tail }
}

/// The t value below which a share `p` of Student's t with `df` degrees of
/// freedom lies (0 < p < 1, df > 0): bisection on [`t_cdf`].
pub fn t_quantile(p: f64, df: f64) -> f64 {
    if p == 0.5 {
        return 0.0;
    }
    if p < 0.5 {
        return -t_quantile(1.0 - p, df);
    }
    let mut hi = 1.0;
    while t_cdf(hi, df) < p && hi < 1e12 {
        hi *= 2.0;
    }
    let mut lo = 0.0;
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if t_cdf(mid, df) < p {
            lo = mid;
        } else {
            hi = mid;
        }
        if hi - lo < 1e-12 * hi.max(1.0) {
            break;
        }
    }
    0.5 * (lo + hi)
}

/// Mean and sample standard deviation (n − 1); the deviation is 0 for one value.
pub fn mean_sd(xs: &[f64]) -> (f64, f64) {
    let n = xs.len() as f64;
    if xs.is_empty() {
        return (f64::NAN, f64::NAN);
    }
    let mean = xs.iter().sum::<f64>() / n;
    if xs.len() < 2 {
        return (mean, 0.0);
    }
    let ss: f64 = xs.iter().map(|x| (x - mean).powi(2)).sum();
    (mean, (ss / (n - 1.0)).sqrt())
}

/// Student's t interval for the mean of `xs` at `level` (e.g. 0.95): the
/// half-width `t(1 − α/2, n − 1) · s / √n`; `None` below two values.
pub fn mean_half_width(xs: &[f64], level: f64) -> Option<f64> {
    if xs.len() < 2 {
        return None;
    }
    let (_, sd) = mean_sd(xs);
    let n = xs.len() as f64;
    Some(t_quantile(0.5 + level / 2.0, n - 1.0) * sd / n.sqrt())
}

/// A difference B − A with its interval and two-sided p-value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Difference {
    pub estimate: f64,
    pub low: f64,
    pub high: f64,
    pub p_value: f64,
}

impl Difference {
    /// Whether the interval leaves out 0.
    pub fn significant(&self) -> bool {
        self.low > 0.0 || self.high < 0.0
    }
}

/// Welch's t test of mean(b) − mean(a), each with at least two values: the
/// interval at `level` on Welch–Satterthwaite degrees of freedom.
pub fn welch(a: &[f64], b: &[f64], level: f64) -> Option<Difference> {
    if a.len() < 2 || b.len() < 2 {
        return None;
    }
    let ((ma, sa), (mb, sb)) = (mean_sd(a), mean_sd(b));
    let (va, vb) = (sa * sa / a.len() as f64, sb * sb / b.len() as f64);
    let estimate = mb - ma;
    let se = (va + vb).sqrt();
    if se == 0.0 {
        // no spread on either side: the difference is what it is
        let p_value = if estimate == 0.0 { 1.0 } else { 0.0 };
        return Some(Difference {
            estimate,
            low: estimate,
            high: estimate,
            p_value,
        });
    }
    let df =
        (va + vb).powi(2) / (va * va / (a.len() as f64 - 1.0) + vb * vb / (b.len() as f64 - 1.0));
    let half = t_quantile(0.5 + level / 2.0, df) * se;
    let p_value = 2.0 * (1.0 - t_cdf((estimate / se).abs(), df));
    Some(Difference {
        estimate,
        low: estimate - half,
        high: estimate + half,
        p_value,
    })
}

/// A statistic of a sample: its mean or a percentile.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Statistic {
    Mean,
    /// The nearest-rank percentile (0–100).
    Percentile(f64),
}

impl Statistic {
    /// The statistic of `xs` (reordered in place); NaN when empty.
    pub fn of(self, xs: &mut [f64]) -> f64 {
        if xs.is_empty() {
            return f64::NAN;
        }
        match self {
            Statistic::Mean => xs.iter().sum::<f64>() / xs.len() as f64,
            Statistic::Percentile(p) => {
                let rank = ((p / 100.0) * xs.len() as f64).ceil() as usize;
                let k = rank.clamp(1, xs.len()) - 1;
                *xs.select_nth_unstable_by(k, f64::total_cmp).1
            }
        }
    }
}

/// Percentile bootstrap of stat(b) − stat(a) over per-request samples:
/// `resamples` draws with replacement from each side (seeded, so the same
/// inputs give the same interval); the estimate is the samples' own
/// difference, the interval the draws' middle `level`, the p-value twice
/// the smaller share of draws on either side of 0. `None` when a side has
/// fewer than two samples.
pub fn bootstrap(
    a: &[f64],
    b: &[f64],
    stat: Statistic,
    level: f64,
    resamples: usize,
    seed: u64,
) -> Option<Difference> {
    if a.len() < 2 || b.len() < 2 || resamples == 0 {
        return None;
    }
    let estimate = stat.of(&mut b.to_vec()) - stat.of(&mut a.to_vec());
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let (mut ra, mut rb) = (vec![0.0; a.len()], vec![0.0; b.len()]);
    let mut draws = Vec::with_capacity(resamples);
    for _ in 0..resamples {
        for x in ra.iter_mut() {
            *x = a[rng.random_range(0..a.len())];
        }
        for x in rb.iter_mut() {
            *x = b[rng.random_range(0..b.len())];
        }
        draws.push(stat.of(&mut rb) - stat.of(&mut ra));
    }
    draws.sort_by(f64::total_cmp);
    let at = |q: f64| {
        let i = (q * (draws.len() - 1) as f64).round() as usize;
        draws[i.min(draws.len() - 1)]
    };
    let alpha = 1.0 - level;
    let below = draws.iter().filter(|d| **d <= 0.0).count() as f64;
    let above = draws.iter().filter(|d| **d >= 0.0).count() as f64;
    let p_value = (2.0 * below.min(above) / draws.len() as f64).min(1.0);
    Some(Difference {
        estimate,
        low: at(alpha / 2.0),
        high: at(1.0 - alpha / 2.0),
        p_value,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two-sided critical values from a printed t table (and the normal's
    /// 1.959964 far out), to six digits.
    #[test]
    fn quantiles_match_the_printed_table() {
        let table = [
            (0.975, 1.0, 12.706205),
            (0.975, 2.0, 4.302653),
            (0.975, 3.0, 3.182446),
            (0.975, 4.0, 2.776445),
            (0.975, 5.0, 2.570582),
            (0.975, 9.0, 2.262157),
            (0.975, 10.0, 2.228139),
            (0.975, 19.0, 2.093024),
            (0.975, 30.0, 2.042272),
            (0.975, 120.0, 1.979930),
            (0.975, 1e7, 1.959964),
            (0.95, 4.0, 2.131847),
            (0.995, 4.0, 4.604095),
            (0.995, 29.0, 2.756386),
            (0.9, 1.0, 3.077684),
            (0.75, 2.0, 0.816497),
        ];
        for (p, df, want) in table {
            let got = t_quantile(p, df);
            assert!(
                (got - want).abs() < 5e-6,
                "t({p}, {df}) = {got}, want {want}"
            );
            assert!((t_quantile(1.0 - p, df) + want).abs() < 5e-6);
            assert!((t_cdf(want, df) - p).abs() < 1e-6, "cdf at {want}, df {df}");
        }
        // fractional degrees of freedom lie between their neighbours
        let q = t_quantile(0.975, 4.5);
        assert!(q < 2.776445 && q > 2.570582, "{q}");
        assert_eq!(t_quantile(0.5, 3.0), 0.0);
    }

    #[test]
    fn means_deviations_and_half_widths() {
        let (m, s) = mean_sd(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]);
        assert_eq!(m, 5.0);
        assert!((s - 2.138089935).abs() < 1e-9, "{s}");
        // n = 3, s = 1: t(0.975, 2) / √3
        let h = mean_half_width(&[1.0, 2.0, 3.0], 0.95).unwrap();
        assert!((h - 4.302653 / 3f64.sqrt()).abs() < 1e-5, "{h}");
        assert_eq!(mean_half_width(&[1.0], 0.95), None);
    }

    /// Welch's test on a pair worked by hand (t = 3.2863 on 8.1967 degrees
    /// of freedom, two-sided p = 0.0107) and on equal sets.
    #[test]
    fn welch_on_known_sets() {
        let a = [10.0, 11.0, 12.0, 13.0, 14.0];
        let b = [13.0, 14.0, 15.0, 16.0, 17.0, 15.0];
        let d = welch(&a, &b, 0.95).unwrap();
        assert_eq!(d.estimate, 3.0);
        // se = sqrt(2.5/5 + 2/6) = 0.912871; df = 8.1967 (Welch–Satterthwaite)
        let se = (2.5f64 / 5.0 + 2.0 / 6.0).sqrt();
        let df = (2.5f64 / 5.0 + 2.0 / 6.0).powi(2)
            / ((2.5f64 / 5.0).powi(2) / 4.0 + (2.0f64 / 6.0).powi(2) / 5.0);
        assert!((df - 8.1967).abs() < 1e-3, "{df}");
        let half = t_quantile(0.975, df) * se;
        assert!((d.high - d.low - 2.0 * half).abs() < 1e-9);
        assert!(d.significant());
        assert!((d.p_value - 0.0107).abs() < 5e-4, "{}", d.p_value);
        let same = welch(&a, &a, 0.95).unwrap();
        assert_eq!(same.estimate, 0.0);
        assert!(!same.significant());
        assert!((same.p_value - 1.0).abs() < 1e-12);
        assert_eq!(welch(&a[..1], &b, 0.95), None);
    }

    #[test]
    fn nearest_rank_percentiles() {
        let mut xs: Vec<f64> = (1..=100).rev().map(f64::from).collect();
        assert_eq!(Statistic::Percentile(99.0).of(&mut xs), 99.0);
        assert_eq!(Statistic::Percentile(50.0).of(&mut xs), 50.0);
        assert_eq!(Statistic::Percentile(100.0).of(&mut xs), 100.0);
        assert_eq!(Statistic::Mean.of(&mut xs), 50.5);
    }

    /// Samples 5 apart are told apart with the right sign; one sample
    /// against itself is not.
    #[test]
    fn bootstrap_tells_shifted_samples_apart() {
        let a: Vec<f64> = (0..200).map(|i| 20.0 + f64::from(i % 10)).collect();
        let b: Vec<f64> = a.iter().map(|x| x + 5.0).collect();
        let d = bootstrap(&a, &b, Statistic::Mean, 0.95, 1_000, 1).unwrap();
        assert!((d.estimate - 5.0).abs() < 1e-9);
        assert!(d.significant() && d.low > 4.0 && d.high < 6.0, "{d:?}");
        let p99 = bootstrap(&a, &b, Statistic::Percentile(99.0), 0.95, 1_000, 1).unwrap();
        assert!(p99.estimate == 5.0 && p99.significant(), "{p99:?}");
        let same = bootstrap(&a, &a, Statistic::Mean, 0.95, 1_000, 1).unwrap();
        assert!(!same.significant(), "{same:?}");
        assert_eq!(bootstrap(&a[..1], &b, Statistic::Mean, 0.95, 10, 1), None);
    }
}
