fn main() {
    let args: Vec<String> = std::env::args().collect();
    match mmsim_spec::load(std::path::Path::new(&args[1]), &args[2..]) {
        Ok(s) => println!("{s:#?}"),
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2)
        }
    }
}
