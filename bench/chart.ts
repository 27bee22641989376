// A hand-written SVG of latency distributions: one CDF line per series on a log-scaled millisecond axis, with
// p50 and p99 marked, so a reader sees the shape (the tail especially), not only two numbers.

export interface CdfSeries {
  label: string;
  /** p0..p100 in milliseconds (101 points, see cdfPoints). */
  points: number[];
}

const COLORS = ['#d1495b', '#00798c', '#edae49', '#30638e'];
const W = 760;
const H = 420;
const M = { left: 64, right: 24, top: 40, bottom: 56 };

const esc = (s: string): string => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

export function renderLatencySvg(given: CdfSeries[], title = 'Latency distributions (CDF)'): string {
  // A run with no latency to show (every push held for a digest) stores no numbers: it draws no line.
  const series = given.filter((s) => s.points.length > 0 && s.points.every((v) => Number.isFinite(v)));
  const all = series.flatMap((s) => s.points).filter((v) => Number.isFinite(v) && v > 0);
  const lo = Math.pow(10, Math.floor(Math.log10(Math.max(0.1, Math.min(...all)))));
  const hi = Math.pow(10, Math.ceil(Math.log10(Math.max(...all))));
  const plotW = W - M.left - M.right;
  const plotH = H - M.top - M.bottom;
  const x = (ms: number): number =>
    M.left + ((Math.log10(Math.max(ms, lo)) - Math.log10(lo)) / (Math.log10(hi) - Math.log10(lo))) * plotW;
  const y = (p: number): number => M.top + plotH - (p / 100) * plotH;

  const parts: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif" font-size="12">`,
    `<rect width="${W}" height="${H}" fill="#fff"/>`,
    `<text x="${W / 2}" y="22" text-anchor="middle" font-size="15" font-weight="bold">${esc(title)}</text>`,
  ];
  // Grid: decades and their 2× / 5× steps on x, every 10 % on y.
  for (let decade = lo; decade <= hi; decade *= 10) {
    for (const step of [1, 2, 5]) {
      const ms = decade * step;
      if (ms > hi) break;
      const gx = x(ms).toFixed(1);
      parts.push(
        `<line x1="${gx}" y1="${M.top}" x2="${gx}" y2="${M.top + plotH}" stroke="${step === 1 ? '#bbb' : '#eee'}"/>`,
      );
      parts.push(
        `<text x="${gx}" y="${M.top + plotH + 16}" text-anchor="middle" fill="#444">${ms >= 1000 ? `${ms / 1000}s` : `${ms}`}</text>`,
      );
    }
  }
  for (let p = 0; p <= 100; p += 10) {
    const gy = y(p).toFixed(1);
    parts.push(
      `<line x1="${M.left}" y1="${gy}" x2="${M.left + plotW}" y2="${gy}" stroke="${p % 50 ? '#eee' : '#bbb'}"/>`,
    );
    parts.push(`<text x="${M.left - 8}" y="${Number(gy) + 4}" text-anchor="end" fill="#444">${p}%</text>`);
  }
  parts.push(
    `<text x="${M.left + plotW / 2}" y="${H - 14}" text-anchor="middle">milliseconds (log scale)</text>`,
    `<text x="16" y="${M.top + plotH / 2}" text-anchor="middle" transform="rotate(-90 16 ${M.top + plotH / 2})">share of episodes at or below</text>`,
  );
  series.forEach((s, i) => {
    const color = COLORS[i % COLORS.length];
    const d = s.points.map((ms, p) => `${p ? 'L' : 'M'}${x(ms).toFixed(1)},${y(p).toFixed(1)}`).join(' ');
    parts.push(`<path d="${d}" fill="none" stroke="${color}" stroke-width="2"/>`);
    for (const p of [50, 99]) {
      parts.push(
        `<circle cx="${x(s.points[p]).toFixed(1)}" cy="${y(p).toFixed(1)}" r="3.5" fill="${color}"/>`,
      );
    }
    const ly = M.top + 16 + i * 18;
    parts.push(
      `<line x1="${M.left + 12}" y1="${ly - 4}" x2="${M.left + 36}" y2="${ly - 4}" stroke="${color}" stroke-width="3"/>`,
      `<text x="${M.left + 42}" y="${ly}" fill="#222">${esc(s.label)} — p50 ${s.points[50].toFixed(0)} ms, p99 ${s.points[99].toFixed(0)} ms</text>`,
    );
  });
  parts.push('</svg>', '');
  return parts.join('\n');
}
