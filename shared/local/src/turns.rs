//! Turns at the one SQLite writer: a request of the API waiting for it goes before the
//! background's page bookkeeping, so a busy crawl does not hold a submit in line behind
//! dozens of its own writes.

use std::sync::{Condvar, Mutex, MutexGuard};

/// Who holds the writer and how many of the first lane wait for it.
#[derive(Default)]
struct Waiting {
    busy: bool,
    first_waiting: usize,
}

/// One holder at a time; the first lane is served before the other.
#[derive(Default)]
pub(crate) struct WriterTurns {
    turns: Mutex<Waiting>,
    first: Condvar,
    other: Condvar,
}

/// The writer's turn; the next waiter's begins when it drops.
pub(crate) struct Turn<'a>(&'a WriterTurns);

impl WriterTurns {
    fn turns(&self) -> MutexGuard<'_, Waiting> {
        self.turns.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Waits for the writer: before every waiter of the other lane when `first`.
    pub(crate) fn enter(&self, first: bool) -> Turn<'_> {
        let mut turns = self.turns();
        if first {
            turns.first_waiting += 1;
            while turns.busy {
                turns = self.first.wait(turns).unwrap_or_else(|p| p.into_inner());
            }
            turns.first_waiting -= 1;
        } else {
            while turns.busy || turns.first_waiting > 0 {
                turns = self.other.wait(turns).unwrap_or_else(|p| p.into_inner());
            }
        }
        turns.busy = true;
        Turn(self)
    }
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        let mut turns = self.0.turns();
        turns.busy = false;
        if turns.first_waiting > 0 {
            self.0.first.notify_one();
        } else {
            self.0.other.notify_one();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Duration;

    #[test]
    fn the_first_lane_goes_before_waiters_of_the_other() {
        let gate = Arc::new(WriterTurns::default());
        let order = Arc::new(Mutex::new(Vec::new()));
        let held = gate.enter(false);
        let mut threads = Vec::new();
        for n in 0..3 {
            let (gate, order) = (gate.clone(), order.clone());
            threads.push(std::thread::spawn(move || {
                let _turn = gate.enter(false);
                order.lock().unwrap().push(format!("other-{n}"));
            }));
        }
        // The other lane queues first (whoever is late waits behind the first lane anyway).
        std::thread::sleep(Duration::from_millis(50));
        let (g, o) = (gate.clone(), order.clone());
        threads.push(std::thread::spawn(move || {
            let _turn = g.enter(true);
            o.lock().unwrap().push("first".to_string());
        }));
        while gate.turns().first_waiting == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
        drop(held);
        for t in threads {
            t.join().unwrap();
        }
        let order = order.lock().unwrap();
        assert_eq!(order.len(), 4);
        assert_eq!(order[0], "first", "{order:?}");
    }

    #[test]
    fn one_holder_at_a_time() {
        let gate = Arc::new(WriterTurns::default());
        let inside = Arc::new(Mutex::new(0u32));
        let threads: Vec<_> = (0..8)
            .map(|n| {
                let (gate, inside) = (gate.clone(), inside.clone());
                std::thread::spawn(move || {
                    for _ in 0..200 {
                        let _turn = gate.enter(n % 3 == 0);
                        let now = {
                            let mut i = inside.lock().unwrap();
                            *i += 1;
                            *i
                        };
                        assert_eq!(now, 1, "two holders at once");
                        std::thread::yield_now();
                        *inside.lock().unwrap() -= 1;
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
    }
}
