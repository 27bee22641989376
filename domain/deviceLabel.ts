// A device's label for the caller's device list, made once from the User-Agent at subscribe time: "Firefox on
// Linux" when the browser and system are recognised, else the User-Agent itself, cut short. Never trusted for
// anything but display, so it is bounded and stripped of control characters.
import { clipUnits, headUnits } from './text';

export const MAX_DEVICE_LABEL = 80;

const BROWSERS: [RegExp, string][] = [
  [/\bEdg(e|A|iOS)?\//, 'Edge'],
  [/\b(OPR|Opera)\//, 'Opera'],
  [/\b(Firefox|FxiOS)\//, 'Firefox'],
  [/\bSamsungBrowser\//, 'Samsung Internet'],
  [/(Chrome|CriOS|Chromium)\//, 'Chrome'], // HeadlessChrome too
  [/\bVersion\/[\d.]+.*\bSafari\//, 'Safari'],
];

const SYSTEMS: [RegExp, string][] = [
  [/\bAndroid\b/, 'Android'],
  [/\b(iPhone|iPad|iPod)\b/, 'iOS'],
  [/\bCrOS\b/, 'ChromeOS'],
  [/\bWindows\b/, 'Windows'],
  [/\bMac OS X\b|\bMacintosh\b/, 'macOS'],
  [/\bLinux\b/, 'Linux'],
];

export function deviceLabel(userAgent: string | undefined): string {
  const ua = headUnits(userAgent ?? '', 1024).head;
  const browser = BROWSERS.find(([pattern]) => pattern.test(ua))?.[1];
  const system = SYSTEMS.find(([pattern]) => pattern.test(ua))?.[1];
  if (browser && system) return `${browser} on ${system}`;
  const raw = ua
    .replace(/[\u0000-\u001f\u007f-\u009f]/g, ' ')
    .replace(/\s+/g, ' ')
    .trim();
  if (!raw) return 'Unknown browser';
  return clipUnits(raw, MAX_DEVICE_LABEL);
}
