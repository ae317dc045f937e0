//! Which cells of a nullable field are valid: TileDB's layout (one byte per
//! cell) or Arrow's (one bit per cell), so a read for Arrow hands its
//! validity over without a second pass.

/// One bit per cell, least significant bit first, 1 = valid: Arrow's
/// validity bitmap, byte for byte.
#[derive(Debug, Clone, Default)]
pub struct Bitmap {
    bits: Vec<u8>,
    len: usize,
}

impl Bitmap {
    /// An empty bitmap with room for `cells` bits.
    pub fn with_capacity(cells: usize) -> Self {
        Bitmap {
            bits: Vec::with_capacity(cells.div_ceil(8)),
            len: 0,
        }
    }

    /// Bits held.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no bit is held.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bit `i` (false past the end).
    pub fn get(&self, i: usize) -> bool {
        i < self.len && self.bits.get(i / 8).is_some_and(|b| b >> (i % 8) & 1 == 1)
    }

    /// The packed bytes (bits past `len` in the last byte are zero).
    pub fn as_bytes(&self) -> &[u8] {
        &self.bits
    }

    /// The packed bytes and the number of bits.
    pub fn into_parts(self) -> (Vec<u8>, usize) {
        (self.bits, self.len)
    }

    /// Appends one bit.
    pub fn push(&mut self, bit: bool) {
        if self.len % 8 == 0 {
            self.bits.push(0);
        }
        if bit {
            if let Some(last) = self.bits.last_mut() {
                *last |= 1 << (self.len % 8);
            }
        }
        self.len = self.len.saturating_add(1);
    }

    /// Appends `n` copies of `bit`.
    pub fn push_n(&mut self, bit: bool, n: usize) {
        let mut left = n;
        while left > 0 && self.len % 8 != 0 {
            self.push(bit);
            left = left.saturating_sub(1);
        }
        let whole = left / 8;
        self.bits
            .extend(std::iter::repeat_n(if bit { 0xff } else { 0 }, whole));
        self.len = self.len.saturating_add(whole.saturating_mul(8));
        for _ in 0..left % 8 {
            self.push(bit);
        }
    }

    /// Appends one bit per byte of TileDB validity (0 = null): eight at a
    /// time once the bitmap is at a byte boundary.
    pub fn extend_from_bytes(&mut self, bytes: &[u8]) {
        let mut rest = bytes;
        while let Some((&b, tail)) = rest.split_first() {
            if self.len % 8 == 0 {
                break;
            }
            self.push(b != 0);
            rest = tail;
        }
        let mut eights = rest.chunks_exact(8);
        self.bits.reserve(rest.len().div_ceil(8));
        for chunk in &mut eights {
            let packed = chunk
                .iter()
                .enumerate()
                .fold(0u8, |acc, (k, &b)| acc | (u8::from(b != 0) << k));
            self.bits.push(packed);
        }
        self.len = self
            .len
            .saturating_add(rest.len().saturating_sub(eights.remainder().len()));
        for &b in eights.remainder() {
            self.push(b != 0);
        }
    }

    /// Empties the bitmap, keeping its allocation.
    pub fn clear(&mut self) {
        self.bits.clear();
        self.len = 0;
    }
}

impl FromIterator<bool> for Bitmap {
    fn from_iter<I: IntoIterator<Item = bool>>(iter: I) -> Self {
        let mut b = Bitmap::default();
        for bit in iter {
            b.push(bit);
        }
        b
    }
}

/// A nullable field's validity, owned.
#[derive(Debug, Clone)]
pub enum Validity {
    /// One byte per cell, 0 = null: TileDB's layout, what reads give by
    /// default and writes take.
    Bytes(Vec<u8>),
    /// One bit per cell, 0 = null: Arrow's layout, what a read asked for
    /// with [`crate::ReadSpec::with_packed_validity`] gives.
    Bits(Bitmap),
}

impl Validity {
    /// An empty validity of the same layout.
    pub fn empty_like(&self) -> Validity {
        match self {
            Validity::Bytes(_) => Validity::Bytes(Vec::new()),
            Validity::Bits(_) => Validity::Bits(Bitmap::default()),
        }
    }

    /// Cells held.
    pub fn len(&self) -> usize {
        match self {
            Validity::Bytes(v) => v.len(),
            Validity::Bits(b) => b.len(),
        }
    }

    /// Whether no cell is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether cell `i` is valid (false past the end).
    pub fn is_valid(&self, i: usize) -> bool {
        self.view().is_valid(i)
    }

    /// Each cell's validity, in order.
    pub fn iter(&self) -> impl Iterator<Item = bool> + '_ {
        (0..self.len()).map(|i| self.is_valid(i))
    }

    /// The bytes of TileDB's layout, if this is in it.
    pub fn as_bytes(&self) -> Option<&[u8]> {
        match self {
            Validity::Bytes(v) => Some(v),
            Validity::Bits(_) => None,
        }
    }

    /// One byte per cell (0 = null), whatever the layout.
    pub fn to_bytes(&self) -> Vec<u8> {
        match self {
            Validity::Bytes(v) => v.clone(),
            Validity::Bits(_) => self.iter().map(u8::from).collect(),
        }
    }

    /// A byte a cell, as bits (`packed`: Arrow's layout) or as they are.
    pub fn of_bytes(bytes: Vec<u8>, packed: bool) -> Validity {
        match packed {
            true => Validity::Bits(Validity::Bytes(bytes).into_bits()),
            false => Validity::Bytes(bytes),
        }
    }

    /// The same cells in Arrow's layout (bytes packed, bits as they are).
    pub fn into_bits(self) -> Bitmap {
        match self {
            Validity::Bytes(v) => {
                let mut bits = Bitmap::with_capacity(v.len());
                bits.extend_from_bytes(&v);
                bits
            }
            Validity::Bits(b) => b,
        }
    }

    /// A borrowed view.
    pub fn view(&self) -> ValidityRef<'_> {
        match self {
            Validity::Bytes(v) => ValidityRef::Bytes(v),
            Validity::Bits(b) => ValidityRef::Bits(b),
        }
    }

    /// Appends one cell's validity.
    pub fn push(&mut self, valid: bool) {
        match self {
            Validity::Bytes(v) => v.push(u8::from(valid)),
            Validity::Bits(b) => b.push(valid),
        }
    }

    /// Appends `other`'s cells (in either layout).
    pub fn append(&mut self, other: &Validity) {
        match (self, other) {
            (Validity::Bytes(a), Validity::Bytes(b)) => a.extend_from_slice(b),
            (Validity::Bits(a), Validity::Bytes(b)) => a.extend_from_bytes(b),
            (a, b) => b.iter().for_each(|valid| a.push(valid)),
        }
    }

    /// Reserves room for `cells` more.
    pub fn reserve(&mut self, cells: usize) {
        match self {
            Validity::Bytes(v) => v.reserve_exact(cells),
            Validity::Bits(b) => b.bits.reserve_exact(cells.div_ceil(8)),
        }
    }

    /// Empties it, keeping the allocation.
    pub fn clear(&mut self) {
        match self {
            Validity::Bytes(v) => v.clear(),
            Validity::Bits(b) => b.clear(),
        }
    }

    /// Bytes held.
    pub fn byte_len(&self) -> usize {
        match self {
            Validity::Bytes(v) => v.len(),
            Validity::Bits(b) => b.as_bytes().len(),
        }
    }
}

impl From<Vec<u8>> for Validity {
    fn from(bytes: Vec<u8>) -> Self {
        Validity::Bytes(bytes)
    }
}

/// The same cells valid, whatever the layout (a byte of 2 is as valid as 1).
impl PartialEq for Validity {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl Eq for Validity {}

/// A nullable field's validity, borrowed.
#[derive(Debug, Clone, Copy)]
pub enum ValidityRef<'a> {
    /// One byte per cell, 0 = null (every decoded tile's).
    Bytes(&'a [u8]),
    /// One bit per cell, 0 = null.
    Bits(&'a Bitmap),
}

impl<'a> ValidityRef<'a> {
    /// Cells described.
    pub fn len(&self) -> usize {
        match self {
            ValidityRef::Bytes(v) => v.len(),
            ValidityRef::Bits(b) => b.len(),
        }
    }

    /// Whether no cell is described.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether cell `i` is valid (false past the end).
    pub fn is_valid(&self, i: usize) -> bool {
        match self {
            ValidityRef::Bytes(v) => v.get(i).is_some_and(|&b| b != 0),
            ValidityRef::Bits(b) => b.get(i),
        }
    }

    /// The bytes of TileDB's layout, if this is in it.
    pub fn as_bytes(&self) -> Option<&'a [u8]> {
        match *self {
            ValidityRef::Bytes(v) => Some(v),
            ValidityRef::Bits(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Packing eight at a time, from any bit position, gives the bits one
    /// at a time would.
    #[test]
    fn bytes_pack_into_the_bits_one_push_at_a_time_gives() {
        let bytes: Vec<u8> = (0..77u32)
            .map(|i| u8::from(i % 3 != 0) * (1 + (i % 2) as u8))
            .collect();
        for start in 0..9 {
            let mut packed: Bitmap = (0..start).map(|i| i % 2 == 0).collect();
            let mut one: Bitmap = packed.clone();
            packed.extend_from_bytes(&bytes);
            for &b in &bytes {
                one.push(b != 0);
            }
            assert_eq!(packed.len(), start + bytes.len());
            assert_eq!(packed.as_bytes(), one.as_bytes(), "from bit {start}");
            for (i, &b) in bytes.iter().enumerate() {
                assert_eq!(packed.get(start + i), b != 0);
            }
            assert!(!packed.get(packed.len()));
        }
    }

    #[test]
    fn runs_of_one_bit_fill_whole_bytes_and_their_edges() {
        for start in 0..9 {
            for n in [0, 1, 7, 8, 9, 30] {
                let mut b: Bitmap = (0..start).map(|_| false).collect();
                b.push_n(true, n);
                b.push(false);
                assert_eq!(b.len(), start + n + 1);
                assert!((0..b.len()).all(|i| b.get(i) == (i >= start && i < start + n)));
            }
        }
    }

    #[test]
    fn layouts_compare_by_the_cells_they_call_valid() {
        let bytes = Validity::Bytes(vec![1, 0, 2, 0, 1]);
        let bits = Validity::Bits([true, false, true, false, true].into_iter().collect());
        assert_eq!(bytes, bits);
        assert_ne!(bytes, Validity::Bytes(vec![1, 0, 1, 0]));
        let mut both = bits.clone();
        both.append(&bytes);
        both.append(&bits);
        assert_eq!(both.len(), 15);
        assert_eq!(both.to_bytes(), [1, 0, 1, 0, 1].repeat(3));
        assert_eq!(bytes.as_bytes(), Some(&[1, 0, 2, 0, 1][..]));
        assert_eq!(Validity::Bits(bytes.clone().into_bits()), bits);
        assert_eq!(bits.as_bytes(), None);
    }
}
