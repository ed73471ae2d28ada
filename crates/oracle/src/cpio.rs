//! A writer for the "newc" cpio format the kernel unpacks as initramfs.
//! Several archives may be concatenated; the kernel unpacks them in order.

pub struct Cpio {
    buf: Vec<u8>,
    ino: u32,
}

pub const S_IFDIR: u32 = 0o040000;
pub const S_IFREG: u32 = 0o100000;
pub const S_IFLNK: u32 = 0o120000;
pub const S_IFCHR: u32 = 0o020000;

impl Default for Cpio {
    fn default() -> Self {
        Self::new()
    }
}

impl Cpio {
    pub fn new() -> Self {
        Cpio {
            buf: Vec::new(),
            ino: 1,
        }
    }

    fn entry(&mut self, name: &str, mode: u32, rdev: (u32, u32), data: &[u8]) {
        let fields = [
            self.ino,
            mode,
            0, // uid
            0, // gid
            if mode & S_IFDIR == S_IFDIR { 2 } else { 1 },
            0, // mtime: fixed, so archives are reproducible
            data.len() as u32,
            0,
            0,
            rdev.0,
            rdev.1,
            name.len() as u32 + 1,
            0,
        ];
        self.ino += 1;
        self.buf.extend_from_slice(b"070701");
        for f in fields {
            self.buf.extend_from_slice(format!("{f:08x}").as_bytes());
        }
        self.buf.extend_from_slice(name.as_bytes());
        self.buf.push(0);
        self.pad();
        self.buf.extend_from_slice(data);
        self.pad();
    }

    fn pad(&mut self) {
        while !self.buf.len().is_multiple_of(4) {
            self.buf.push(0);
        }
    }

    pub fn dir(&mut self, name: &str) {
        self.entry(name, S_IFDIR | 0o755, (0, 0), &[]);
    }

    pub fn file(&mut self, name: &str, mode: u32, data: &[u8]) {
        self.entry(name, S_IFREG | mode, (0, 0), data);
    }

    pub fn symlink(&mut self, name: &str, target: &str) {
        self.entry(name, S_IFLNK | 0o777, (0, 0), target.as_bytes());
    }

    pub fn char_dev(&mut self, name: &str, major: u32, minor: u32) {
        self.entry(name, S_IFCHR | 0o600, (major, minor), &[]);
    }

    /// Ends the archive and returns its bytes.
    pub fn finish(mut self) -> Vec<u8> {
        self.entry("TRAILER!!!", 0, (0, 0), &[]);
        // Pad to 512 bytes, as cpio(1) does, so archives concatenate cleanly.
        while !self.buf.len().is_multiple_of(512) {
            self.buf.push(0);
        }
        self.buf
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newc_layout() {
        let mut c = Cpio::new();
        c.file("a", 0o644, b"xyz");
        let b = c.finish();
        assert_eq!(&b[..6], b"070701");
        // Header is 110 bytes, then "a\0" padded to 112, then data.
        assert_eq!(&b[110..112], b"a\0");
        assert_eq!(&b[112..115], b"xyz");
        assert_eq!(b.len() % 512, 0);
        let s = String::from_utf8_lossy(&b);
        assert!(s.contains("TRAILER!!!"));
    }
}
