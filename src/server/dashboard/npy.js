// NumPy .npy files (format versions 1.0, 2.0 and 3.0) in the browser: C-order arrays of little-endian
// (or single-byte) numbers and bools. Anything else is refused with a message that says what to do.
const MAGIC = [0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59]; // \x93NUMPY

// descr type code -> KServe datatype and item size.
const TYPES = {
  f2: ['FP16', 2], f4: ['FP32', 4], f8: ['FP64', 8],
  i1: ['INT8', 1], i2: ['INT16', 2], i4: ['INT32', 4], i8: ['INT64', 8],
  u1: ['UINT8', 1], u2: ['UINT16', 2], u4: ['UINT32', 4], u8: ['UINT64', 8],
  b1: ['BOOL', 1],
};

function fail(what) {
  throw new Error(what);
}

function halfToFloat(h) {
  const s = h & 0x8000 ? -1 : 1;
  const e = (h >> 10) & 0x1f;
  const f = h & 0x3ff;
  if (e === 0) return s * 2 ** -14 * (f / 1024);
  if (e === 31) return f ? NaN : s * Infinity;
  return s * 2 ** (e - 15) * (1 + f / 1024);
}

// Parses `buffer` (an ArrayBuffer). Returns {datatype, shape, values}: values is an array of numbers
// (bools for BOOL) in C order. Throws an Error with a readable message for a bad or unsupported file.
export function parseNpy(buffer) {
  const u8 = new Uint8Array(buffer);
  if (u8.length < 10 || !MAGIC.every((b, i) => u8[i] === b)) {
    fail('not a .npy file (it does not start with \\x93NUMPY); save arrays with numpy.save');
  }
  const major = u8[6];
  const view = new DataView(buffer);
  let headerLength;
  let offset;
  if (major === 1) {
    headerLength = view.getUint16(8, true);
    offset = 10;
  } else if (major === 2 || major === 3) {
    if (u8.length < 12) fail('the .npy header is cut short');
    headerLength = view.getUint32(8, true);
    offset = 12;
  } else {
    fail(`.npy format version ${major}.${u8[7]} is not supported (1.0, 2.0 and 3.0 are)`);
  }
  if (offset + headerLength > u8.length) fail('the .npy header is longer than the file');
  const header = new TextDecoder(major === 3 ? 'utf-8' : 'latin1').decode(u8.subarray(offset, offset + headerLength));
  const descr = /['"]descr['"]\s*:\s*['"]([^'"]*)['"]/.exec(header);
  const fortran = /['"]fortran_order['"]\s*:\s*(True|False)/.exec(header);
  const shapeText = /['"]shape['"]\s*:\s*\(([^)]*)\)/.exec(header);
  if (!descr || !fortran || !shapeText) fail('the .npy header has no descr, fortran_order or shape');
  if (fortran[1] === 'True') {
    fail('the array is in Fortran order; save numpy.ascontiguousarray(a) instead');
  }
  const shape = [];
  for (const part of shapeText[1].split(',')) {
    const t = part.trim().replace(/L$/, '');
    if (t === '') continue;
    if (!/^\d+$/.test(t)) fail(`the .npy shape (${shapeText[1]}) is not a tuple of sizes`);
    shape.push(Number(t));
  }
  const m = /^([<>|=]?)([a-zA-Z])(\d+)$/.exec(descr[1]);
  const code = m ? (m[2] === '?' ? 'b' : m[2]) + m[3] : '';
  const type = TYPES[code];
  if (!m || !type) {
    fail(`the .npy dtype '${descr[1]}' is not supported (float16/32/64, int8..64, uint8..64 and bool are)`);
  }
  const [datatype, size] = type;
  if (m[1] === '>' && size > 1) fail(`the .npy data is big-endian ('${descr[1]}'); save it little-endian (a.astype('<${code}'))`);
  const count = shape.reduce((a, b) => a * b, 1);
  const dataOffset = offset + headerLength;
  const expected = count * size;
  if (u8.length - dataOffset !== expected) {
    fail(`the .npy data holds ${u8.length - dataOffset} bytes, its shape (${shape.join(', ')}) and dtype need ${expected}`);
  }
  const data = buffer.slice(dataOffset, dataOffset + expected); // aligned copy
  let values;
  switch (code) {
    case 'f2': values = Array.from(new Uint16Array(data), halfToFloat); break;
    case 'f4': values = Array.from(new Float32Array(data)); break;
    case 'f8': values = Array.from(new Float64Array(data)); break;
    case 'i1': values = Array.from(new Int8Array(data)); break;
    case 'i2': values = Array.from(new Int16Array(data)); break;
    case 'i4': values = Array.from(new Int32Array(data)); break;
    case 'u1': values = Array.from(new Uint8Array(data)); break;
    case 'u2': values = Array.from(new Uint16Array(data)); break;
    case 'u4': values = Array.from(new Uint32Array(data)); break;
    case 'b1': values = Array.from(new Uint8Array(data), (v) => v !== 0); break;
    case 'i8':
    case 'u8': {
      const big = code === 'i8' ? new BigInt64Array(data) : new BigUint64Array(data);
      values = Array.from(big, (v) => {
        if (v > BigInt(Number.MAX_SAFE_INTEGER) || v < BigInt(Number.MIN_SAFE_INTEGER)) {
          fail(`the .npy value ${v} is too large to send as JSON (beyond 2^53)`);
        }
        return Number(v);
      });
      break;
    }
    default: fail(`dtype ${code} is not handled`);
  }
  return { datatype, shape, values };
}
