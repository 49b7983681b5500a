//! `rucx-scale`: endpoints-per-worker and incast measurements. Run
//! `rucx-scale -h`.

fn main() {
    std::process::exit(rucx::scale::main(std::env::args().skip(1)));
}
