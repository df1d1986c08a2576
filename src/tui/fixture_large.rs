//! A large `View` for rendering benchmarks and scale tests, built through the
//! real core (`Room::apply`, `Room::view`).
