//! Several statements sent to SQLite's connection thread in one execution: under the store's
//! write lock, every execution is a round trip the lock is held across, so the rows a
//! transaction writes at its commit go together.

use sqlx::{QueryBuilder, Sqlite, SqliteConnection};

use crate::Result;

/// Most bound parameters of one execution (SQLite allows 32,766).
const MAX_BINDS: usize = 30_000;

/// Statements gathered for as few executions as their parameters allow.
pub(crate) struct StatementBatch<'a> {
    full: Vec<QueryBuilder<'a, Sqlite>>,
    current: QueryBuilder<'a, Sqlite>,
    /// Parameters and statements in `current`.
    binds: usize,
    statements: usize,
}

impl Default for StatementBatch<'_> {
    fn default() -> Self {
        StatementBatch {
            full: Vec::new(),
            current: QueryBuilder::new(""),
            binds: 0,
            statements: 0,
        }
    }
}

impl<'a> StatementBatch<'a> {
    /// The builder to push the next statement into, one with at most `binds` parameters.
    pub(crate) fn statement(&mut self, binds: usize) -> &mut QueryBuilder<'a, Sqlite> {
        if self.statements > 0 && self.binds + binds > MAX_BINDS {
            self.full
                .push(std::mem::replace(&mut self.current, QueryBuilder::new("")));
            self.binds = 0;
            self.statements = 0;
        }
        if self.statements > 0 {
            self.current.push("; ");
        }
        self.binds += binds;
        self.statements += 1;
        &mut self.current
    }

    /// Runs every statement, in order.
    pub(crate) async fn execute(self, conn: &mut SqliteConnection) -> Result<()> {
        let last = (self.statements > 0).then_some(self.current);
        for mut q in self.full.into_iter().chain(last) {
            q.build().execute(&mut *conn).await?;
        }
        Ok(())
    }
}
