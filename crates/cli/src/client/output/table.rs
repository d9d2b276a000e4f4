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
        let n = self.headers.len();
        let mut widths: Vec<usize> = self.headers.iter().map(|h| h.chars().count()).collect();
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
