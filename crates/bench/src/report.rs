//! The printed report: one line per measure with the goal, PASS/MISS and the ratio to the goal.

use std::fmt::Write as _;

/// How a measure compares with its goal.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Goal {
    /// No goal: a reference figure.
    None,
    /// measured ≤ limit.
    AtMost(f64),
    /// measured ≥ limit.
    AtLeast(f64),
}

/// One line of the report.
#[derive(Debug, Clone)]
pub struct Line {
    pub id: String,
    pub what: String,
    /// The measured value as printed (with its unit).
    pub shown: String,
    /// The value compared with the goal (same unit as the goal).
    pub value: f64,
    pub goal: Goal,
    /// How the goal reads, e.g. "≤ 20 ms".
    pub goal_text: String,
    /// Extra ratio text after PASS/MISS.
    pub note: String,
}

impl Line {
    pub fn verdict(&self) -> &'static str {
        match self.goal {
            Goal::None => "-",
            _ if self.value.is_nan() => "n/a",
            Goal::AtMost(g) if self.value <= g => "PASS",
            Goal::AtLeast(g) if self.value >= g => "PASS",
            _ => "MISS",
        }
    }

    /// measured / goal.
    pub fn ratio(&self) -> Option<f64> {
        match self.goal {
            Goal::AtMost(g) | Goal::AtLeast(g) if self.value.is_finite() && g != 0.0 => {
                Some(self.value / g)
            }
            _ => None,
        }
    }
}

/// The whole report.
#[derive(Debug, Default)]
pub struct Report {
    pub header: Vec<(String, String)>,
    pub lines: Vec<Line>,
    pub details: Vec<String>,
    pub warnings: Vec<String>,
}

impl Report {
    /// Lines sorted by measure number; a line without a number stays under the one before it.
    fn ordered(&self) -> Vec<&Line> {
        let mut groups: Vec<Vec<&Line>> = Vec::new();
        for l in &self.lines {
            match groups.last_mut() {
                Some(g) if l.id.is_empty() => g.push(l),
                _ => groups.push(vec![l]),
            }
        }
        groups.sort_by_key(|g| g[0].id.parse::<u32>().unwrap_or(u32::MAX));
        groups.into_iter().flatten().collect()
    }

    pub fn render(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "== osac-bench report ==");
        let hw = self
            .header
            .iter()
            .map(|(k, _)| k.chars().count())
            .max()
            .unwrap_or(0);
        for (k, v) in &self.header {
            let _ = writeln!(out, "{k:<hw$}  {v}");
        }
        let _ = writeln!(out);
        let w_what = self
            .lines
            .iter()
            .map(|l| l.what.chars().count())
            .max()
            .unwrap_or(0)
            .max(7);
        let w_shown = self
            .lines
            .iter()
            .map(|l| l.shown.chars().count())
            .max()
            .unwrap_or(0)
            .max(8);
        let w_goal = self
            .lines
            .iter()
            .map(|l| l.goal_text.chars().count())
            .max()
            .unwrap_or(0)
            .max(4);
        let _ = writeln!(
            out,
            "{:<2} {:<w_what$}  {:>w_shown$}  {:<w_goal$}  result",
            "#", "measure", "measured", "goal"
        );
        for l in self.ordered() {
            let ratio = l
                .ratio()
                .map(|r| format!("{r:.2}× goal"))
                .unwrap_or_default();
            let note = match (ratio.is_empty(), l.note.is_empty()) {
                (true, _) => l.note.clone(),
                (false, true) => ratio,
                (false, false) => format!("{}; {ratio}", l.note),
            };
            let what = pad(&l.what, w_what);
            let shown = pad_left(&l.shown, w_shown);
            let goal = pad(&l.goal_text, w_goal);
            let _ = writeln!(
                out,
                "{:<2} {what}  {shown}  {goal}  {:<4}  {note}",
                l.id,
                l.verdict()
            );
        }
        let judged: Vec<&Line> = self.lines.iter().filter(|l| l.goal != Goal::None).collect();
        let passed = judged.iter().filter(|l| l.verdict() == "PASS").count();
        let _ = writeln!(out, "\ngoals met: {passed} of {}", judged.len());
        if !self.details.is_empty() {
            let _ = writeln!(out, "\ndetails:");
            for d in &self.details {
                let _ = writeln!(out, "  {d}");
            }
        }
        if !self.warnings.is_empty() {
            let _ = writeln!(out, "\nwarnings:");
            for w in &self.warnings {
                let _ = writeln!(out, "  ! {w}");
            }
        }
        out
    }
}

// `format!` pads by chars, which is what we want, but "≥"/"×" are one char each: keep it explicit.
fn pad(s: &str, w: usize) -> String {
    let n = s.chars().count();
    format!("{s}{}", " ".repeat(w.saturating_sub(n)))
}

fn pad_left(s: &str, w: usize) -> String {
    let n = s.chars().count();
    format!("{}{s}", " ".repeat(w.saturating_sub(n)))
}

/// 12345.6 → "12,346".
pub fn thousands(v: f64) -> String {
    let n = v.round() as i64;
    let s = n.abs().to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    if n < 0 { format!("-{out}") } else { out }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(value: f64, goal: Goal) -> Line {
        Line {
            id: "1".into(),
            what: "x".into(),
            shown: "v".into(),
            value,
            goal,
            goal_text: "g".into(),
            note: String::new(),
        }
    }

    #[test]
    fn verdicts_and_ratios() {
        assert_eq!(line(10.0, Goal::AtMost(20.0)).verdict(), "PASS");
        assert_eq!(line(30.0, Goal::AtMost(20.0)).verdict(), "MISS");
        assert_eq!(line(0.3, Goal::AtLeast(0.25)).verdict(), "PASS");
        assert_eq!(line(0.2, Goal::AtLeast(0.25)).verdict(), "MISS");
        assert_eq!(line(f64::NAN, Goal::AtMost(1.0)).verdict(), "n/a");
        assert_eq!(line(1.0, Goal::None).verdict(), "-");
        assert_eq!(line(10.0, Goal::AtMost(20.0)).ratio(), Some(0.5));
        assert_eq!(line(f64::INFINITY, Goal::AtMost(0.0)).verdict(), "MISS");
    }

    #[test]
    fn thousands_separators() {
        assert_eq!(thousands(0.0), "0");
        assert_eq!(thousands(999.0), "999");
        assert_eq!(thousands(1000.0), "1,000");
        assert_eq!(thousands(1234567.4), "1,234,567");
    }

    #[test]
    fn render_counts_goals() {
        let r = Report {
            lines: vec![
                line(10.0, Goal::AtMost(20.0)),
                line(30.0, Goal::AtMost(20.0)),
                line(1.0, Goal::None),
            ],
            ..Default::default()
        };
        let text = r.render();
        let order: Vec<&str> = r.ordered().iter().map(|l| l.what.as_str()).collect();
        assert_eq!(order.len(), 3);
        assert!(text.contains("goals met: 1 of 2"), "{text}");
        assert!(text.contains("MISS"));
    }
}
