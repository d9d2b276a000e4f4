//! Persistence of osac-net objects.

pub mod filter_sql;
