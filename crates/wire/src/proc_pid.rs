//! The per-process files of `/proc/PID` sockstat reads: `stat` (the start time, the kernel
//! thread flag) and `status` (the effective uid, the effective capabilities, the pid in each
//! pid namespace). An inspected process chooses its own command name, which sits inside `stat`
//! and `status`: every reader here finds its fields past anything the name could hold.

/// `PF_KTHREAD` in `stat`'s flags field (`include/linux/sched.h`).
const PF_KTHREAD: u64 = 0x0020_0000;

/// The fields of `stat` after the command name: the name (field 2) may hold spaces and
/// parentheses, so they are counted from the last `)`. The first one returned is field 3.
fn after_comm(stat: &[u8]) -> Option<std::str::SplitAsciiWhitespace<'_>> {
    let close = stat.iter().rposition(|&b| b == b')')?;
    Some(
        std::str::from_utf8(&stat[close + 1..])
            .ok()?
            .split_ascii_whitespace(),
    )
}

/// Field 22 of `stat` (`starttime`, clock ticks after boot).
pub fn start_ticks(stat: &[u8]) -> Option<u64> {
    after_comm(stat)?.nth(22 - 3)?.parse().ok()
}

/// True when `stat`'s flags (field 9) mark a kernel thread, which holds no file descriptors.
pub fn is_kernel_thread(stat: &[u8]) -> Option<bool> {
    let flags: u64 = after_comm(stat)?.nth(9 - 3)?.parse().ok()?;
    Some(flags & PF_KTHREAD != 0)
}

/// The line of `status` that starts with `key` (`b"Uid:"`), without the key.
fn status_line<'a>(status: &'a [u8], key: &[u8]) -> Option<&'a [u8]> {
    status
        .split(|&b| b == b'\n')
        .find_map(|l| l.strip_prefix(key))
}

fn fields(line: &[u8]) -> impl Iterator<Item = &[u8]> {
    line.split(|&b| b == b'\t' || b == b' ')
        .filter(|f| !f.is_empty())
}

/// The effective uid (`Uid:\treal\teffective\tsaved\tfs`).
pub fn effective_uid(status: &[u8]) -> Option<u32> {
    let eff = fields(status_line(status, b"Uid:")?).nth(1)?;
    u32::try_from(decimal(eff)?).ok()
}

/// The effective capability mask (`CapEff:\t000001ffffffffff`).
pub fn cap_eff(status: &[u8]) -> Option<u64> {
    let hex = std::str::from_utf8(status_line(status, b"CapEff:")?)
        .ok()?
        .trim();
    u64::from_str_radix(hex, 16).ok()
}

/// How many pid namespaces the process is numbered in (`NSpid:` fields): 1 when the reader's
/// `/proc` and the process share their pid namespace.
pub fn nspid_depth(status: &[u8]) -> Option<usize> {
    Some(fields(status_line(status, b"NSpid:")?).count())
}

/// A non-empty all-digit name (a pid, an fd), as a number.
pub fn decimal(b: &[u8]) -> Option<u64> {
    if b.is_empty() || b.len() > 19 {
        return None;
    }
    let mut n: u64 = 0;
    for &c in b {
        if !c.is_ascii_digit() {
            return None;
        }
        n = n * 10 + u64::from(c - b'0');
    }
    Some(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_count_from_the_last_parenthesis() {
        let stat = b"4121 (a) b) (c) S 1 4121 4121 0 -1 4194560 100 0 0 0 0 0 0 0 20 0 1 0 \
                     987654 12345678 300 18446744073709551615\n";
        assert_eq!(start_ticks(stat), Some(987_654));
        assert_eq!(is_kernel_thread(stat), Some(false));
        assert_eq!(start_ticks(b"4121 (x) S 1"), None);
        assert_eq!(start_ticks(b"no parenthesis"), None);
        // kthreadd: flags 0x208040.
        let kthread = b"2 (kthreadd) S 0 0 0 0 -1 2129984 0 0 0 0 0 0 0 0 20 0 1 0 5 0 0\n";
        assert_eq!(is_kernel_thread(kthread), Some(true));
    }

    #[test]
    fn status_fields() {
        let s = b"Name:\tx\nUid:\t1000\t0\t0\t0\nGid:\t1\t1\t1\t1\nNSpid:\t42\t7\n\
                  CapEff:\t0000000000080000\n";
        assert_eq!(effective_uid(s), Some(0));
        assert_eq!(effective_uid(b"Name:\tx\n"), None);
        assert_eq!(effective_uid(b"Uid:\t5\n"), None);
        assert_eq!(cap_eff(s), Some(1 << 19));
        assert_eq!(nspid_depth(s), Some(2));
        assert_eq!(nspid_depth(b"Name:\tx\n"), None);
    }

    #[test]
    fn decimal_names_only() {
        assert_eq!(decimal(b"123"), Some(123));
        assert_eq!(decimal(b"self"), None);
        assert_eq!(decimal(b""), None);
        assert_eq!(decimal(b"12a"), None);
        assert_eq!(decimal(b"99999999999999999999"), None);
    }
}
