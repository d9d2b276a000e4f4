//! Pure domain logic of osac-net: no I/O, no async, no database.

pub mod filter;
