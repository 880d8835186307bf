{
  "format": "fwman-signature",
  "version": 1,
  "algorithm": "ed25519",
  "key_id": "33d1cd9eab9b080a",
  "signature": "hFynTrS1zdHyJpkJrVeNG1xE0e4jr4b2hHzf/fYj6pis5jJTnUbcAPSoWMm0y/hdtmUEpJTxVi7D8OM18UyaDg=="
}
