//! Max-price curves (to be written).
