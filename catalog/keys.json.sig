{
  "format": "fwman-signature",
  "version": 1,
  "algorithm": "ed25519",
  "key_id": "23cb724582f7654c",
  "signature": "gsEtGzau2sUa7B/Xqh4AX0Zk3FUBrNKTAAOTfekkTMCskO5TjzH3pLCd9YLlWwTGgcmH4qaeypUHmEkmF7auAw=="
}
