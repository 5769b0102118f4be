//! The worker loop of a long-running process: receive tasks, process them concurrently,
//! acknowledge what is done. (On AWS the SQS event source plays this part.)

use super::settle::{abandon, gave_up_after};
use super::task::{process, Disposition};
use super::App;
use crate::ports::WorkQueue;
use crate::stages::{timed, Stage};
use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinSet;

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Tasks one worker keeps in flight.
pub const TASKS_PER_WORKER: usize = 8;

/// How long one receive of an idle process waits for a task: it asks its queue three times a
/// minute (SQS's longest poll), and a task that arrives is received at once.
pub const RECEIVE_WAIT: Duration = Duration::from_secs(20);
/// How long one receive of a busy process waits: short, so that the poll a process leaves open
/// when it dies (the queue may still hand it tasks, which then wait out their visibility
/// timeout) lasts a moment only.
const BUSY_WAIT: Duration = Duration::from_secs(1);

/// Webhook runs a process keeps in flight beside its pages: they wait on receivers, not on the
/// CPU, so they take no page's place (past this many they do).
const WEBHOOK_RUNS: usize = 256;

/// Works the queue with `workers` workers' worth of tasks in flight
/// (`workers` x [`TASKS_PER_WORKER`]) until `shutdown` turns true: one receive at a time, for
/// as many tasks as there is room for. A webhook run does not count against that room, so a
/// slow receiver never holds up a page. Tasks still in flight then are handed back at once.
pub async fn run_workers(app: Arc<App>, workers: usize, mut shutdown: watch::Receiver<bool>) {
    let capacity = workers.max(1) * TASKS_PER_WORKER;
    // Receipts of the deliveries being worked on.
    let working: Arc<Mutex<HashSet<String>>> = Arc::default();
    let mut inflight: JoinSet<()> = JoinSet::new();
    let mut hooks: JoinSet<()> = JoinSet::new();
    loop {
        while inflight.try_join_next().is_some() {}
        while hooks.try_join_next().is_some() {}
        if *shutdown.borrow() {
            break;
        }
        if inflight.len() >= capacity {
            tokio::select! {
                _ = inflight.join_next() => {}
                _ = shutdown.changed() => {}
            }
            continue;
        }
        let wait = if inflight.is_empty() {
            RECEIVE_WAIT
        } else {
            BUSY_WAIT
        };
        let batch = tokio::select! {
            b = timed(Stage::Bookkeeping, app.queue.receive(capacity - inflight.len(), wait)) => b,
            _ = shutdown.changed() => continue,
        };
        let batch = match batch {
            Ok(b) => b,
            Err(e) => {
                tracing::warn!(error = %e, "queue receive failed");
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        for delivery in batch {
            let (app, working) = (app.clone(), working.clone());
            lock(&working).insert(delivery.receipt.clone());
            let set = if delivery.task.webhook && hooks.len() < WEBHOOK_RUNS {
                &mut hooks
            } else {
                &mut inflight
            };
            set.spawn(timed(Stage::Bookkeeping, async move {
                if process(&app, &delivery).await == Disposition::Ack {
                    if let Err(e) = app.queue.ack(&delivery.receipt).await {
                        tracing::warn!(error = %e, "ack failed; the task will run again");
                    }
                }
                lock(&working).remove(&delivery.receipt);
            }));
        }
    }
    inflight.abort_all();
    hooks.abort_all();
    while inflight.join_next().await.is_some() {}
    while hooks.join_next().await.is_some() {}
    app.give_back_places().await;
    // A stop on purpose is not a crash: what was being worked on is handed back to the queue
    // at once rather than left to count as interrupted.
    let left: Vec<String> = lock(&working).drain().collect();
    for receipt in left {
        if let Err(e) = app.queue.defer(&receipt, Duration::ZERO).await {
            tracing::warn!(error = %e, "a task in flight could not be handed back");
        }
    }
}

/// Drains a dead-letter queue: each task there exhausted its deliveries, so its page is
/// recorded as failed and its job allowed to end. Runs until `shutdown` turns true.
pub async fn run_dead_letters(
    app: Arc<App>,
    dead_letters: Arc<dyn WorkQueue>,
    mut shutdown: watch::Receiver<bool>,
) {
    loop {
        if *shutdown.borrow() {
            return;
        }
        let batch = tokio::select! {
            b = dead_letters.receive(10, RECEIVE_WAIT) => b,
            _ = shutdown.changed() => return,
        };
        let batch = match batch {
            Ok(b) => b,
            Err(e) => {
                tracing::warn!(error = %e, "dead-letter receive failed");
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        for d in batch {
            match abandon(&app, &d.task, &gave_up_after(app.config.max_receives)).await {
                Ok(true) => {
                    if let Err(e) = dead_letters.ack(&d.receipt).await {
                        tracing::warn!(error = %e, "dead-letter ack failed");
                    }
                }
                // Its page is still being fetched: look again after the visibility timeout.
                Ok(false) => {}
                Err(e) => tracing::warn!(error = %e, "dead letter not recorded; will retry"),
            }
        }
    }
}
