//! Paired devices and their token hashes (being written).
