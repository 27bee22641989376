import assert from 'node:assert/strict';
import { deviceLabel, MAX_DEVICE_LABEL } from '../../domain/deviceLabel';

describe('deviceLabel', () => {
  it('names the browser and the system of common User-Agents', () => {
    const cases: [string, string][] = [
      [
        'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36',
        'Chrome on Linux',
      ],
      [
        'Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:133.0) Gecko/20100101 Firefox/133.0',
        'Firefox on Windows',
      ],
      [
        'Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Safari/605.1.15',
        'Safari on macOS',
      ],
      [
        'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36 Edg/131.0.0.0',
        'Edge on Windows',
      ],
      [
        'Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Mobile Safari/537.36',
        'Chrome on Android',
      ],
      [
        'Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Mobile/15E148 Safari/604.1',
        'Safari on iOS',
      ],
      [
        'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) HeadlessChrome/131.0.0.0 Safari/537.36',
        'Chrome on Linux',
      ],
    ];
    for (const [ua, label] of cases) assert.equal(deviceLabel(ua), label, ua);
  });

  it('falls back to the User-Agent, bounded and without control characters', () => {
    assert.equal(deviceLabel(undefined), 'Unknown browser');
    assert.equal(deviceLabel('  '), 'Unknown browser');
    assert.equal(deviceLabel('curl/8.5.0'), 'curl/8.5.0');
    assert.equal(deviceLabel('bad\u0000\nagent'), 'bad agent');
    const long = deviceLabel('x'.repeat(5000));
    assert.equal(long.length, MAX_DEVICE_LABEL);
    assert.ok(long.endsWith('…'));
  });
});
