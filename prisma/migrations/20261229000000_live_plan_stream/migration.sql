-- AlterTable
ALTER TABLE "Execution" ADD COLUMN     "streamShown" JSONB,
ADD COLUMN     "streamStoppedAt" TIMESTAMP(3),
ADD COLUMN     "streamTs" TEXT;

-- CreateTable
CREATE TABLE "StreamingRefusal" (
    "teamId" TEXT NOT NULL,
    "error" TEXT NOT NULL,
    "refusedAt" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "StreamingRefusal_pkey" PRIMARY KEY ("teamId")
);

