//! The meter of one page's extraction: the bytes its walks build (every copy counts, so
//! re-indenting a deeply nested list over and over is counted as the work it is) and the nodes
//! they visit, checked against the budget's deadline now and then. Once over, every walk stops
//! early and the page fails with the reason.

use crate::engine::budget::{Budget, Exceeded};
use std::cell::{Cell, RefCell};

/// Bytes of text the formats of one page may build in all.
pub const MAX_OUTPUT: usize = 64 * 1024 * 1024;
/// Nodes visited between two looks at the clock.
const CHECK_EVERY: u32 = 1024;

pub(crate) struct Meter<'a> {
    budget: &'a Budget,
    built: Cell<usize>,
    steps: Cell<u32>,
    over: RefCell<Option<Exceeded>>,
}

impl<'a> Meter<'a> {
    pub(crate) fn new(budget: &'a Budget) -> Self {
        Meter {
            budget,
            built: Cell::new(0),
            steps: Cell::new(0),
            over: RefCell::new(None),
        }
    }

    fn stop(&self, why: Exceeded) {
        self.over.borrow_mut().get_or_insert(why);
    }

    /// Whether the work has been stopped.
    pub(crate) fn stopped(&self) -> bool {
        self.over.borrow().is_some()
    }

    /// Counts `bytes` built; false (and stopped) once the total is over [`MAX_OUTPUT`].
    pub(crate) fn add(&self, bytes: usize) -> bool {
        let built = self.built.get().saturating_add(bytes);
        self.built.set(built);
        if built > MAX_OUTPUT {
            self.stop(Exceeded::TooLarge(format!(
                "extracting the page would build more than {} MiB of text",
                MAX_OUTPUT >> 20
            )));
        }
        !self.stopped()
    }

    /// Counts one node visited, looking at the deadline now and then; false once stopped.
    pub(crate) fn step(&self) -> bool {
        let n = self.steps.get().wrapping_add(1);
        self.steps.set(n);
        if n.is_multiple_of(CHECK_EVERY) {
            if let Err(e) = self.budget.check() {
                self.stop(e);
            }
        }
        !self.stopped()
    }

    /// Looks at the deadline now (before a step that may visit many nodes at once, such as a
    /// selector's search of a subtree); false once stopped.
    pub(crate) fn check_now(&self) -> bool {
        if let Err(e) = self.budget.check() {
            self.stop(e);
        }
        !self.stopped()
    }

    /// Ok unless the work was stopped, with the reason otherwise.
    pub(crate) fn result(&self) -> Result<(), Exceeded> {
        match self.over.borrow().as_ref() {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }
}
