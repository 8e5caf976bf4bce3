//! DNS-SD announcement (being written).
