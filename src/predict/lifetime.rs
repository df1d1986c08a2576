//! Job lifetime prediction (to be written).
