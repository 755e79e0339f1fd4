/// Install rustls' ring crypto provider once per process (reqwest and tonic need one).
pub fn install_crypto_provider() {
    // Err means a provider is already installed, which is what we want.
    let _ = rustls::crypto::ring::default_provider().install_default();
}
