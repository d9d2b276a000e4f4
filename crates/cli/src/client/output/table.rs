//! A plain text table: columns padded to their widest cell.

/// A plain text table.
#[derive(Debug, Clone, Default)]
pub struct Table {
    pub(super) headers: Vec<String>,
    pub(super) rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these column headers.
    pub fn new(headers: &[&str]) -> Table {
        Table {
            headers: headers.iter().map(|h| h.to_string()).collect(),
            rows: Vec::new(),
        }
    }

    /// Adds a row (missing cells are blank).
    pub fn push(&mut self, row: Vec<String>) {
        self.rows.push(row);
    }

    /// Columns padded to their widest cell, three spaces apart, no trailing blanks.
    pub fn render(&self) -> String {
        self.render_at_least(&mut Vec::new())
    }

    /// [`Table::render`] with each column at least as wide as in `widths`, which is updated to
    /// the widths used: tables rendered one after another with the same `widths` (a watch's
    /// rows) line up, a column widening only when a wider cell arrives.
    pub fn render_at_least(&self, widths: &mut Vec<usize>) -> String {
        let n = self.headers.len();
        widths.resize(n, 0);
        for (w, h) in widths.iter_mut().zip(&self.headers) {
            *w = (*w).max(h.chars().count());
        }
        for row in &self.rows {
            for (i, cell) in row.iter().enumerate().take(n) {
                widths[i] = widths[i].max(cell.chars().count());
            }
        }
        let mut out = String::new();
        for row in std::iter::once(&self.headers).chain(&self.rows) {
            let mut line = String::new();
            for (i, width) in widths.iter().enumerate() {
                let cell = row.get(i).map(String::as_str).unwrap_or("");
                line.push_str(cell);
                if i + 1 < n {
                    let pad = width - cell.chars().count() + 3;
                    line.extend(std::iter::repeat_n(' ', pad));
                }
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }
}
