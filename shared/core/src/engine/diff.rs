//! Unified diffs of two texts, within bounds: the line diff gives up looking for the smallest
//! diff at the budget's deadline (the diff stays correct, only longer), and the text of the diff
//! is cut at [`MAX_DIFF`] bytes with a note saying how much was left out.

use super::budget::{Budget, Exceeded};
use similar::{ChangeTag, DiffTag, TextDiff};
use std::time::Duration;

/// Longest diff text produced.
pub const MAX_DIFF: usize = 1024 * 1024;
/// Longest the line diff looks for the smallest diff.
const MAX_SEARCH: Duration = Duration::from_secs(2);

/// The unified diff (3 lines of context) from `before` to `after`, headed `previous` and
/// `current`; empty when they are equal.
pub fn unified(before: &str, after: &str, budget: &Budget) -> Result<String, Exceeded> {
    let diff = TextDiff::configure()
        .timeout(MAX_SEARCH.min(budget.remaining() / 2))
        .diff_lines(before, after);
    budget.check()?;
    let changed: usize = diff
        .ops()
        .iter()
        .map(|op| match op.tag() {
            DiffTag::Equal => 0,
            _ => op.old_range().len() + op.new_range().len(),
        })
        .sum();
    let mut out = String::new();
    let (mut shown, mut changed_shown) = (0usize, 0usize);
    'hunks: for hunk in diff.unified_diff().context_radius(3).iter_hunks() {
        budget.check()?;
        if out.is_empty() {
            out.push_str("--- previous\n+++ current\n");
        }
        for (i, change) in hunk.iter_changes().enumerate() {
            let line = change.to_string_lossy();
            if out.len() + line.len() > MAX_DIFF {
                // Full: what is left is only counted.
                break 'hunks;
            }
            if i == 0 {
                out.push_str(&format!("{}\n", hunk.header()));
            }
            out.push_str(change.tag().to_string().as_str());
            out.push_str(&line);
            if !line.ends_with('\n') {
                out.push('\n');
            }
            shown += 1;
            if change.tag() != ChangeTag::Equal {
                changed_shown += 1;
            }
        }
    }
    let left_out = changed - changed_shown;
    if left_out > 0 {
        out.push_str(&format!(
            "... the diff is cut at {} KiB: {left_out} more changed lines ({shown} lines shown)\n",
            MAX_DIFF >> 10
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn small_diffs_are_plain_unified_diffs() {
        let d = unified("a\nb\nc\n", "a\nB\nc\n", &Budget::unlimited()).unwrap();
        assert_eq!(
            d,
            "--- previous\n+++ current\n@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n"
        );
        assert_eq!(
            unified("same\n", "same\n", &Budget::unlimited()).unwrap(),
            ""
        );
    }

    #[test]
    fn huge_diffs_are_bounded_in_time_and_size() {
        let before: String = (0..120_000).map(|i| format!("line {i} before\n")).collect();
        let after: String = (0..120_000).map(|i| format!("line {i} after\n")).collect();
        let t = Instant::now();
        let d = unified(&before, &after, &Budget::new(Duration::from_secs(4))).unwrap();
        assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
        assert!(d.len() <= MAX_DIFF + 200, "{}", d.len());
        // Every changed line is either shown or counted as left out.
        let shown = d
            .lines()
            .skip(2)
            .filter(|l| l.starts_with('-') || l.starts_with('+'))
            .count();
        let left_out: usize = d
            .rsplit_once(": ")
            .and_then(|(_, tail)| tail.split(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no count in {}", &d[d.len() - 200..]));
        assert_eq!(shown + left_out, 240_000);
    }
}
