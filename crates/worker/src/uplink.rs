//! The fleet cap's word to the coordinator: what the step's gate says
//! (progress, a waiting request) turned into messages of the link, coalesced
//! so that a burst of completions costs one message, not one each.

use cicada_proto::v1::{self, worker_message::Body as WBody};
use tokio::sync::mpsc;

use crate::executor::GateMessage;

/// Forward `gate`'s messages for step `step` until the gate is dropped or
/// the link closes. Of a burst, only the newest progress and the newest
/// waiting index matter: both are running totals or the current head.
pub async fn forward(
    mut gate: mpsc::UnboundedReceiver<GateMessage>,
    step: u32,
    tx: mpsc::Sender<v1::WorkerMessage>,
) {
    while let Some(first) = gate.recv().await {
        let (mut progress, mut waiting) = (None, None);
        let mut take = |m: GateMessage| match m {
            GateMessage::Progress { completed, sent } => progress = Some((completed, sent)),
            GateMessage::Waiting { index } => waiting = Some(index),
        };
        take(first);
        while let Ok(m) = gate.try_recv() {
            take(m);
        }
        // progress first: the coordinator may admit the waiting request on it
        let bodies = progress
            .map(|(completed, sent)| {
                WBody::CapProgress(v1::CapProgress {
                    step,
                    completed,
                    sent,
                })
            })
            .into_iter()
            .chain(waiting.map(|index| WBody::CapWaiting(v1::CapWaiting { step, index })));
        for body in bodies {
            if tx
                .send(v1::WorkerMessage { body: Some(body) })
                .await
                .is_err()
            {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_burst_becomes_its_newest_progress_and_waiting_index() {
        let (gate_tx, gate_rx) = mpsc::unbounded_channel();
        let (tx, mut rx) = mpsc::channel(16);
        for (completed, sent) in [(1, 4), (2, 4), (3, 5)] {
            gate_tx
                .send(GateMessage::Progress { completed, sent })
                .unwrap();
        }
        gate_tx.send(GateMessage::Waiting { index: 9 }).unwrap();
        gate_tx.send(GateMessage::Waiting { index: 13 }).unwrap();
        drop(gate_tx);
        forward(gate_rx, 2, tx).await;
        let mut got = Vec::new();
        while let Ok(m) = rx.try_recv() {
            got.push(m.body.unwrap());
        }
        assert_eq!(
            got,
            vec![
                WBody::CapProgress(v1::CapProgress {
                    step: 2,
                    completed: 3,
                    sent: 5
                }),
                WBody::CapWaiting(v1::CapWaiting { step: 2, index: 13 }),
            ]
        );
    }
}
