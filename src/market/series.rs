//! Price statistics of a pool's step function (to be written).
