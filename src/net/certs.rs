//! Certificates for the LAN listener (being written).
