//! Lambda entry points.
