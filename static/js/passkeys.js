// The browser's half of the passkey ceremonies (WebAuthn), in a file of its own because the screens'
// Content-Security-Policy allows no inline script. The server sends the options as JSON (binary values in
// base64url) and takes the authenticator's answer as JSON; accounts/views.py holds the other half.
//   - sign-in page (#passkey-sign-in): options, navigator.credentials.get(), answer, then the page to go to;
//   - passkeys screen (#passkey-register): options, navigator.credentials.create(), answer with a name.
// Both carry the relying party (data-rp-id, data-origins: PASSKEY_RP_ID, PASSKEY_ORIGINS): a page opened at
// another origin says where passkeys work, with a link, instead of failing in the browser ("invalid domain")
// or at the server ("unexpected client data origin").

(() => {
  const toBytes = (text) => {
    const base64 = text.replace(/-/g, "+").replace(/_/g, "/") + "=".repeat((4 - (text.length % 4)) % 4);
    return Uint8Array.from(atob(base64), (c) => c.charCodeAt(0)).buffer;
  };
  const toText = (buffer) =>
    btoa(String.fromCharCode(...new Uint8Array(buffer))).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");

  // The CSRF token the screens hand to htmx (base.html's hx-headers) serves these requests too.
  const csrfToken = () => JSON.parse(document.body.getAttribute("hx-headers") || "{}")["X-CSRFToken"] || "";

  async function post(url, body) {
    const response = await fetch(url, {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-CSRFToken": csrfToken() },
      body: JSON.stringify(body || {}),
    });
    let answer = {};
    try {
      answer = await response.json();
    } catch (error) {
      answer = { detail: `The server answered ${response.status}.` };
    }
    if (!response.ok) {
      const fields = Object.values(answer.errors || {}).flat().join(" ");
      throw new Error([answer.detail, fields].filter(Boolean).join(" "));
    }
    return answer;
  }

  const descriptors = (list) => (list || []).map((credential) => ({ ...credential, id: toBytes(credential.id) }));

  function show(error, message) {
    error.textContent = message;
    error.hidden = !message;
  }

  async function signIn(section) {
    const options = await post(section.dataset.optionsUrl);
    const credential = await navigator.credentials.get({
      publicKey: { ...options, challenge: toBytes(options.challenge), allowCredentials: descriptors(options.allowCredentials) },
    });
    const answer = {
      id: credential.id,
      rawId: toText(credential.rawId),
      type: credential.type,
      response: {
        clientDataJSON: toText(credential.response.clientDataJSON),
        authenticatorData: toText(credential.response.authenticatorData),
        signature: toText(credential.response.signature),
        userHandle: credential.response.userHandle ? toText(credential.response.userHandle) : null,
      },
      clientExtensionResults: credential.getClientExtensionResults(),
    };
    const done = await post(section.dataset.url, { credential: answer, next: section.dataset.next });
    window.location.assign(done.redirect);
  }

  async function register(form) {
    const options = await post(form.dataset.optionsUrl);
    const credential = await navigator.credentials.create({
      publicKey: {
        ...options,
        challenge: toBytes(options.challenge),
        user: { ...options.user, id: toBytes(options.user.id) },
        excludeCredentials: descriptors(options.excludeCredentials),
      },
    });
    const answer = {
      id: credential.id,
      rawId: toText(credential.rawId),
      type: credential.type,
      response: {
        clientDataJSON: toText(credential.response.clientDataJSON),
        attestationObject: toText(credential.response.attestationObject),
        transports: credential.response.getTransports ? credential.response.getTransports() : [],
      },
      clientExtensionResults: credential.getClientExtensionResults(),
    };
    await post(form.dataset.url, { name: form.elements.name.value, credential: answer });
    window.location.assign(window.location.pathname);
  }

  // The origin passkeys work at when this page is not at one of them (null when it is): an origin whose host
  // is the relying party or under it, as browsers require.
  function elsewhere(element) {
    const rpId = element.dataset.rpId || "";
    const origins = (element.dataset.origins || "").split(" ").filter(Boolean);
    const fits = (host) => host === rpId || host.endsWith(`.${rpId}`);
    if (origins.includes(window.location.origin) && fits(window.location.hostname)) return null;
    const hostOf = (origin) => {
      try {
        return new URL(origin).hostname;
      } catch (error) {
        return "";
      }
    };
    return origins.find((origin) => fits(hostOf(origin))) || origins[0] || "";
  }

  function explainElsewhere(error, there) {
    error.textContent = `Passkeys do not work at ${window.location.origin}: `;
    if (there) {
      const link = document.createElement("a");
      link.href = there + window.location.pathname + window.location.search;
      link.textContent = link.href;
      error.append(`they work at ${there}. Open this page there: `, link, ". ");
    }
    error.append(
      "To use them at this address, set PASSKEY_ORIGINS and PASSKEY_RP_ID (a host name, not an IP address);" +
        " `manage.py up` sets them from its --host and --port when PASSKEY_ORIGINS is unset."
    );
    error.hidden = false;
  }

  // Say where passkeys work, and keep the button from a ceremony bound to fail; true when the page is elsewhere.
  function guarded(element, error, button) {
    const there = elsewhere(element);
    if (there === null) return false;
    explainElsewhere(error, there);
    button.disabled = true;
    return true;
  }

  function unsupported(error) {
    if (window.PublicKeyCredential) return false;
    show(error, "This browser offers no passkeys (WebAuthn), or the page is not on a secure origin.");
    return true;
  }

  document.addEventListener("DOMContentLoaded", () => {
    const section = document.getElementById("passkey-sign-in");
    if (section) {
      const error = section.querySelector("#passkey-error");
      const button = section.querySelector("#passkey-sign-in-button");
      guarded(section, error, button);
      button.addEventListener("click", () => {
        show(error, "");
        if (!unsupported(error)) signIn(section).catch((failure) => show(error, failure.message));
      });
    }
    const form = document.getElementById("passkey-register");
    if (form) {
      const error = form.querySelector("#passkey-error");
      guarded(form, error, form.querySelector("button[type=submit]"));
      form.addEventListener("submit", (event) => {
        event.preventDefault();
        show(error, "");
        if (!unsupported(error)) register(form).catch((failure) => show(error, failure.message));
      });
    }
  });
})();
