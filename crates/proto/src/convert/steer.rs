//! The web UI's Edit on the wire (`Steer`: users of a closed loop, rate and
//! cap of an open one) and back into the domain type.

use std::time::Duration;

use cicada_plan::Steer;

use crate::v1;

/// Why a `Steer` message cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum SteerError {
    /// A spawn rate that is not a positive number.
    #[error("the change's spawn rate {0} is not a positive number")]
    SpawnRate(f64),
    /// A request rate that is not above 0 (infinity is allowed).
    #[error("the change's request rate {0} is not above 0")]
    Rate(f64),
    /// A cap of no requests at all.
    #[error("the change's max_concurrency is 0")]
    NoConcurrency,
}

/// A change as it goes on the wire.
pub fn encode_steer(s: &Steer) -> v1::Steer {
    v1::Steer {
        step: s.step,
        at_us: s.at.as_micros() as u64,
        name: s.name.clone(),
        users: s.users,
        spawn_rate: s.spawn_rate,
        mine: s.mine.clone(),
        rate: s.rate,
        max_concurrency: s.max_concurrency,
    }
}

/// A change as the worker runs it.
pub fn decode_steer(w: v1::Steer) -> Result<Steer, SteerError> {
    if let Some(r) = w.spawn_rate.filter(|r| !(r.is_finite() && *r > 0.0)) {
        return Err(SteerError::SpawnRate(r));
    }
    if let Some(r) = w.rate.filter(|r| r.is_nan() || *r <= 0.0) {
        return Err(SteerError::Rate(r));
    }
    if w.max_concurrency == Some(0) {
        return Err(SteerError::NoConcurrency);
    }
    Ok(Steer {
        step: w.step,
        at: Duration::from_micros(w.at_us),
        name: w.name,
        users: w.users,
        spawn_rate: w.spawn_rate,
        mine: w.mine,
        rate: w.rate,
        max_concurrency: w.max_concurrency,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_survives_the_wire_and_a_bad_rate_does_not() {
        let s = Steer {
            step: 0,
            at: Duration::from_millis(12_500),
            name: "edit-1".into(),
            users: 7,
            spawn_rate: Some(2.5),
            mine: vec![1, 3, 5],
            rate: None,
            max_concurrency: None,
        };
        assert_eq!(decode_steer(encode_steer(&s)).unwrap(), s);
        let mut bad = encode_steer(&s);
        bad.spawn_rate = Some(0.0);
        assert!(decode_steer(bad).is_err());
        let open = Steer {
            users: 0,
            mine: Vec::new(),
            rate: Some(f64::INFINITY),
            max_concurrency: Some(8),
            ..s
        };
        assert_eq!(decode_steer(encode_steer(&open)).unwrap(), open);
        for (rate, cap) in [(Some(0.0), None), (Some(f64::NAN), None), (None, Some(0))] {
            let mut bad = encode_steer(&open);
            (bad.rate, bad.max_concurrency) = (rate, cap);
            assert!(decode_steer(bad).is_err());
        }
    }
}
