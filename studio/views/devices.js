// The "Your devices" list inside the notifications card: every browser of the user's that gets notifications,
// this one marked, each removable. `panel` is the card's { say, render, disableThisBrowser }.
import { api } from '../shared/api.js';
import { h, timeAgo } from '../shared/dom.js';
import { loadDevices, push } from '../shared/push.js';

/** Remove: this browser's own device is turned off entirely (else the next visit would re-add it). */
async function removeDevice(device, panel) {
  if (push.busy) return;
  if (device.id === push.thisDeviceId) return panel.disableThisBrowser();
  push.busy = true;
  try {
    await api('DELETE', `/notifications/push/subscriptions/${encodeURIComponent(device.id)}`);
    await loadDevices();
    panel.say('success', `${device.label} will get no more notifications.`);
  } catch (err) {
    panel.say('error', `${device.label} was not removed: ${err.message}`);
  } finally {
    push.busy = false;
    panel.render();
  }
}

function deviceItem(device, panel) {
  const mine = device.id === push.thisDeviceId;
  return h(
    'li',
    { class: 'device', 'data-device-id': device.id },
    h(
      'span',
      { class: 'device-name' },
      h('strong', {}, device.label),
      mine ? h('span', { class: 'badge badge-this' }, 'This browser') : '',
      h('span', { class: 'muted' }, device.host),
      h(
        'span',
        { class: 'muted' },
        'Added ',
        timeAgo(device.createdAt),
        ' · last notified ',
        device.lastSuccessAt ? timeAgo(device.lastSuccessAt) : 'never',
      ),
    ),
    h(
      'button',
      {
        type: 'button',
        class: 'button button-quiet',
        'aria-label': `Remove ${device.label}`,
        onclick: () => removeDevice(device, panel),
        disabled: push.busy,
      },
      'Remove',
    ),
  );
}

export function devicesSection(panel) {
  const items = (push.devices || []).map((device) => deviceItem(device, panel));
  return h(
    'section',
    { class: 'devices', 'aria-labelledby': 'devices-title' },
    h('h3', { id: 'devices-title' }, 'Your devices'),
    items.length
      ? h('ul', { id: 'devices' }, ...items)
      : h('p', { class: 'muted' }, 'No browser of yours gets notifications yet.'),
  );
}
