//! Survival analysis of spot instance lifetimes (to be written).
