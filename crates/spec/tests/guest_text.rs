//! `guest_text`: a guest's sections as a spec of their own parse to the
//! guest the host's spec holds.

#[test]
fn a_guests_text_parses_to_the_guest_the_host_spec_holds() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/guest_tcg.toml"
    ))
    .unwrap();
    let host = mmsim_spec::parse_str(&text, "h.toml", &[]).unwrap();
    let g = mmsim_spec::guest_text(&text, "g1").unwrap();
    assert!(!g.contains("host"), "{g}");
    let alone = mmsim_spec::parse_str(&g, "g.toml", &[]).unwrap();
    let held = &host.vms[0].guest;
    assert_eq!(alone.machine.memory, held.machine.memory);
    assert_eq!(alone.swap.len(), held.swap.len());
    assert_eq!(alone.cgroups.len(), held.cgroups.len());
    assert_eq!(alone.cgroups[0].memory_max, held.cgroups[0].memory_max);
    assert_eq!(alone.tasks.len(), held.tasks.len());
    assert_eq!(alone.tasks[0].steps.len(), held.tasks[0].steps.len());
    let e = mmsim_spec::guest_text(&text, "nope").unwrap_err();
    assert!(e.contains("[vm.nope]"), "{e}");
}

#[test]
fn a_guests_text_leaves_its_devices_host_files_to_the_host() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/guest_virtio.toml"
    ))
    .unwrap()
    .replace(
        "host_file = \"g1swap\"",
        "host_file = \"g1swap\"\ncache = \"none\"",
    );
    let g = mmsim_spec::guest_text(&text, "g1").unwrap();
    assert!(!g.contains("host_file") && !g.contains("cache ="), "{g}");
    let alone = mmsim_spec::parse_str(&g, "g.toml", &[]).unwrap();
    assert_eq!(alone.swap.len(), 1);
    assert_eq!(alone.disks.len(), 1);
}
