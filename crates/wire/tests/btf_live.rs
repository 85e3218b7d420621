//! The BTF decoder and the owner scan's layout on the running kernel's own type information
//! (`/sys/kernel/btf/vmlinux` is world-readable; no privilege needed).

use sockstat_wire::btf::{Btf, Kind};
use sockstat_wire::task_file::{program, Layout, Maps};

#[test]
fn running_kernel_btf_gives_the_task_file_layout() {
    let Ok(data) = std::fs::read("/sys/kernel/btf/vmlinux") else {
        eprintln!("SKIPPED running_kernel_btf_gives_the_task_file_layout: no kernel BTF here");
        return;
    };
    let btf = Btf::parse(&data).expect("the kernel's BTF parses");
    assert!(btf.len() > 10_000, "{} types", btf.len());
    let Some(_) = btf.find(Kind::Func, "bpf_iter_task_file") else {
        eprintln!("SKIPPED: this kernel has no task_file iterator");
        return;
    };
    let l = Layout::from_btf(&btf).expect("layout");
    // Stable facts of every 64-bit kernel: upid is {int nr; struct pid_namespace *ns;}, a
    // socket inode number is an unsigned long, i_mode is the first member of struct inode.
    assert_eq!(
        (l.upid_nr, l.upid_size, l.inode_ino_size, l.inode_mode),
        (0, 16, 8, 0)
    );
    assert_eq!(
        l.task_tgid,
        l.task_pid + 4,
        "pid and tgid are adjacent pid_t"
    );
    let p = program(
        &l,
        Maps {
            last: 3,
            wanted: Some(4),
        },
    );
    // A sanity bound on the generated code (106 instructions since the per-process pid
    // namespace translation): the program is straight-line work per fd, far below any verifier
    // limit; a count far outside this means the assembler emitted something unintended.
    assert!(p.len() > 30 && p.len() < 160, "{} instructions", p.len());
}

#[test]
fn fuzz_entry_accepts_the_seeds() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/btf");
    let kernel_like = std::fs::read(dir.join("kernel-like")).unwrap();
    // The synthetic seed is complete: the layout resolves and a program is assembled.
    let btf = Btf::parse(&kernel_like).unwrap();
    assert!(Layout::from_btf(&btf).is_ok());
    sockstat_wire::fuzzing::fuzz_btf(&kernel_like);
    sockstat_wire::fuzzing::fuzz_btf(&std::fs::read(dir.join("vmlinux-prefix")).unwrap());
}
